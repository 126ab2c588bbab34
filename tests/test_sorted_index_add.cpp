// The deterministic CUDA index_add (Note [sorted index_add]): its per-thread walk run on
// the host, after std::stable_sort in place of CUB, in a shuffled thread order, equals the
// CPU index_add bit for bit; on a GPU ("[.cuda]"), the real kernel does too, run after run.
#include "catch2_compat.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/factories.h"
#include "core/ops.h"
#include "kernels/cuda/sorted_index_add.cuh"
#include "kernels/kernels.h"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

using namespace loom;

template <typename T>
void check_walk_equals_cpu(DType dtype) {
  INFO(dtype_name(dtype));
  manual_seed(21);
  std::mt19937_64 rng(21);
  // (outer, rows, inner) = (3, 17, 5) along dim 1; 40 indices over 17 rows: many repeats.
  const int64_t O = 3, V = 17, In = 5, N = 40;
  const Tensor out0 = test::random_nonzero({O, V, In}, dtype);
  const Tensor src = test::random_nonzero({O, N, In}, dtype);
  std::vector<int64_t> index(N);
  for (auto& k : index) k = int64_t(rng() % V);
  index[7] = index[8] = index[30] = 4;  // one row hit three times

  Tensor expected = out0.clone();
  kernels::index_add(expected, 1, from_vector<int64_t>(index, {N}), src);

  // Stable sort of (key, position) pairs, as cub::DeviceRadixSort::SortPairs does.
  std::vector<int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return index[a] < index[b]; });
  std::vector<uint64_t> keys(N);
  for (int64_t k = 0; k < N; ++k) keys[k] = uint64_t(index[size_t(order[k])]);

  Tensor actual = out0.clone();
  const kernels::cuda::SortedIndexAddGeometry g{O, V, In, N};
  std::vector<int64_t> threads(size_t(O * N * In));
  std::iota(threads.begin(), threads.end(), 0);
  std::shuffle(threads.begin(), threads.end(), rng);  // any schedule gives the same sums
  for (int64_t t : threads)
    kernels::cuda::sorted_index_add_at(t, actual.data_ptr<T>(), src.data_ptr<T>(), keys.data(), order.data(), g);
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  REQUIRE(a == e);
  REQUIRE(a != out0.to_vector<double>());
}

TEST_CASE("sorted index_add (host): the walk equals the CPU index_add bit for bit", "[cuda_host]") {
  check_walk_equals_cpu<float>(kFloat32);
  check_walk_equals_cpu<double>(kFloat64);
  check_walk_equals_cpu<BFloat16>(kBFloat16);  // rounded after every add, as the CPU
}

TEST_CASE("sorted index_add (host): an out-of-range key writes nothing", "[cuda_host]") {
  const kernels::cuda::SortedIndexAddGeometry g{1, 4, 2, 3};
  std::vector<float> out(8, 1.f), src{1, 2, 3, 4, 5, 6};
  const std::vector<uint64_t> keys{1, 4, 4};  // 4 == rows: the sentinel for bad indices
  const std::vector<int64_t> positions{2, 0, 1};
  for (int64_t t = 0; t < 6; ++t) kernels::cuda::sorted_index_add_at(t, out.data(), src.data(), keys.data(), positions.data(), g);
  REQUIRE(out == std::vector<float>{1, 1, 6, 7, 1, 1, 1, 1});  // row 1 += src row 2 only
}

TEST_CASE("cuda: index_add and the embedding backward are deterministic and equal the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(22);
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor out0 = test::random_nonzero({1000, 33}, dtype);
    const Tensor src = test::random_nonzero({5000, 33}, dtype);
    const Tensor index = randint(0, 50, {5000});  // heavy repeats in 50 of the 1000 rows
    Tensor expected = out0.clone();
    kernels::index_add(expected, 0, index, src);
    Tensor first = out0.to(kCUDA), second = out0.to(kCUDA);
    kernels::index_add(first, 0, index.to(kCUDA), src.to(kCUDA));
    kernels::index_add(second, 0, index.to(kCUDA), src.to(kCUDA));
    REQUIRE(first.to(kCPU).to(kFloat64).to_vector<double>() == expected.to(kFloat64).to_vector<double>());
    REQUIRE(second.to(kCPU).to(kFloat64).to_vector<double>() == first.to(kCPU).to(kFloat64).to_vector<double>());
  }
}
