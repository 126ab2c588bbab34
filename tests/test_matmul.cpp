// matmul / mm / kernels::bmm / the GEMM of kernels/cpu/gemm.h against plain-loop float64
// references; gradchecks for every rank combination; error paths.
#include <algorithm>
#include <cstdlib>

#include "test_util.h"
#include "autograd/node.h"
#include "kernels/cpu/gemm.h"
#include "kernels/kernels.h"

using namespace loom;
using namespace loom::test;

namespace {

// matmul of the values of a and b in double, with PyTorch's shape rules written out as
// loops, plus per element sum_k |a_ik b_kj|: the scale of its rounding error.
struct Reference {
  Shape shape;
  std::vector<double> value, magnitude;
  int64_t K = 0;
};

Reference reference_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.sizes(), bs = b.sizes();
  if (as.size() == 1) as.insert(as.begin(), 1);  // a row
  if (bs.size() == 1) bs.push_back(1);           // a column
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), nb - ab.size(), 1);
  bb.insert(bb.begin(), nb - bb.size(), 1);
  Reference r;
  r.K = K;
  int64_t B = 1;
  for (size_t d = 0; d < nb; ++d) {
    r.shape.push_back(std::max(ab[d], bb[d]));
    B *= r.shape.back();
  }
  const std::vector<double> av = values(a), bv = values(b);
  for (int64_t i = 0; i < B; ++i) {
    // Batch item i's matrix in a and in b (a size-1 batch dim is broadcast).
    int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int64_t d = int64_t(nb) - 1; d >= 0; --d) {
      const int64_t idx = rem % r.shape[size_t(d)];
      rem /= r.shape[size_t(d)];
      ia += (ab[size_t(d)] == 1 ? 0 : idx) * sa;
      ib += (bb[size_t(d)] == 1 ? 0 : idx) * sb;
      sa *= ab[size_t(d)];
      sb *= bb[size_t(d)];
    }
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = av[size_t((ia * M + m) * K + k)] * bv[size_t((ib * K + k) * N + n)];
          sum += p;
          mag += std::abs(p);
        }
        r.value.push_back(sum);
        r.magnitude.push_back(mag);
      }
    }
  }
  if (a.dim() > 1) r.shape.push_back(M);
  if (b.dim() > 1) r.shape.push_back(N);
  return r;
}

// The shared tolerance table, plus the rounding a K-term sum may accumulate
// (|error| <= K u sum_k |a_ik b_kj|, u the unit roundoff of the accumulation type: float
// for float32 and the 16-bit floats, double for float64).
void check_matmul(const Tensor& out, const Reference& ref, DType dtype, const std::string& what = "") {
  INFO(what);
  REQUIRE(out.dtype() == dtype);
  REQUIRE(out.sizes() == ref.shape);
  const Tolerance tol = tolerance(dtype);
  const double u = dtype == kFloat64 ? 0x1p-53 : 0x1p-24;
  const std::vector<double> got = values(out);
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tol.atol + tol.rtol * std::abs(ref.value[i]) + double(ref.K) * u * ref.magnitude[i];
    if (!(std::abs(got[i] - ref.value[i]) <= bound)) {
      FAIL(what << " element " << i << ": got " << got[i] << ", expected " << ref.value[i] << " ("
                << dtype_name(dtype) << ")");
    }
  }
}

void check_matmul(const Tensor& a, const Tensor& b, const std::string& what = "") {
  check_matmul(matmul(a, b), reference_matmul(a, b), a.dtype(), what);
}

struct ShapeCase {
  Shape a, b, out;
};

// Every rank combination, with broadcast batch dims and sizes that are not multiples of
// the SIMD width.
const std::vector<ShapeCase>& shape_cases() {
  static const std::vector<ShapeCase> cases{
      {{7}, {7}, {}},                               // dot
      {{5}, {5, 3}, {3}},                           // vector @ matrix
      {{4, 5}, {5}, {4}},                           // matrix @ vector
      {{4, 5}, {5, 3}, {4, 3}},                     // matrix @ matrix
      {{17, 33}, {33, 19}, {17, 19}},
      {{5}, {2, 5, 3}, {2, 3}},                     // vector @ batch
      {{2, 4, 5}, {5}, {2, 4}},                     // batch @ vector
      {{2, 4, 5}, {5, 3}, {2, 4, 3}},               // batch @ matrix (folded)
      {{2, 3, 4, 5}, {5, 6}, {2, 3, 4, 6}},
      {{4, 5}, {2, 5, 3}, {2, 4, 3}},               // matrix @ batch (broadcast a)
      {{2, 4, 5}, {2, 5, 3}, {2, 4, 3}},            // batch @ batch
      {{3, 1, 4, 5}, {2, 5, 3}, {3, 2, 4, 3}},      // both broadcast
      {{1, 2, 4, 5}, {3, 1, 5, 3}, {3, 2, 4, 3}},
  };
  return cases;
}

}  // namespace

TEST_CASE("matmul matches a plain-loop reference for every rank combination", "[matmul]") {
  manual_seed(1);
  for (DType dt : float_dtypes()) {
    for (const ShapeCase& c : shape_cases()) {
      const Tensor a = random_nonzero(c.a, dt), b = random_nonzero(c.b, dt);
      const Tensor out = matmul(a, b);
      CHECK(out.sizes() == c.out);
      check_matmul(out, reference_matmul(a, b), dt, shape_str(c.a) + " @ " + shape_str(c.b));
      check_matmul(a.matmul(b), reference_matmul(a, b), dt, "Tensor::matmul");
    }
  }
}

TEST_CASE("matmul of non-contiguous operands: transposed, sliced, permuted, expanded", "[matmul]") {
  manual_seed(2);
  for (DType dt : float_dtypes()) {
    const std::string name = dtype_name(dt);
    // Column-major operands (transposes) are multiplied in place.
    const Tensor at = random_nonzero({21, 13}, dt).t();    // (13, 21)
    const Tensor bt = random_nonzero({18, 21}, dt).t();    // (21, 18)
    const Tensor a = random_nonzero({13, 21}, dt), b = random_nonzero({21, 18}, dt);
    check_matmul(at, b, name + " A^T B");
    check_matmul(a, bt, name + " A B^T");
    check_matmul(at, bt, name + " A^T B^T");
    // A window of columns keeps unit stride, with a leading dimension above the width.
    check_matmul(random_nonzero({13, 30}, dt).slice(1, 4, 25), b, name + " column window of a");
    // Every other column: no unit stride, a copy is made.
    check_matmul(random_nonzero({13, 42}, dt).slice(1, 0, 42, 2), bt, name + " strided a");
    check_matmul(a, random_nonzero({42, 18}, dt).slice(0, 0, 42, 2), name + " row-strided b");
    check_matmul(random_nonzero({42}, dt).slice(0, 0, 42, 2), bt, name + " strided vector");
    // Batched: transposed matrices, permuted batch dims, broadcast (stride-0) batches.
    const Tensor ab = random_nonzero({3, 9, 7}, dt).transpose(1, 2);        // (3, 7, 9)
    const Tensor bb = random_nonzero({9, 3, 5}, dt).permute({1, 0, 2});     // (3, 9, 5)
    check_matmul(ab, bb, name + " transposed and permuted batch");
    check_matmul(random_nonzero({7, 9}, dt).expand({3, 7, 9}), bb, name + " expanded a");
    check_matmul(ab, random_nonzero({1, 9, 5}, dt).expand({3, 9, 5}), name + " expanded b");
    check_matmul(random_nonzero({2, 1, 7, 9}, dt).expand({2, 3, 7, 9}),
                 random_nonzero({3, 1, 9, 5}, dt).transpose(0, 1).expand({2, 3, 9, 5}),
                 name + " expanded 4-D batch");
    check_matmul(random_nonzero({4, 3, 7, 9}, dt).transpose(0, 1), random_nonzero({9, 5}, dt),
                 name + " permuted batch @ matrix (not foldable)");
  }
}

TEST_CASE("matmul at sizes that use Eigen's blocked and threaded GEMM", "[matmul]") {
  manual_seed(3);
  for (DType dt : {kFloat32, kFloat64}) {
    check_matmul(random_nonzero({67, 300}, dt), random_nonzero({71, 300}, dt).t(), "67x300x71");
    check_matmul(random_nonzero({9, 33, 40}, dt), random_nonzero({9, 40, 20}, dt), "batch of 9 (over threads)");
  }
  // Above the batch-parallel threshold (per matrix M·N·K >= 256³): Eigen threads each GEMM.
  check_matmul(random_nonzero({2, 260, 257}), random_nonzero({2, 257, 258}), "batch of 2 large");
  // Right on one thread and on several, batched (over threads) and folded.
  const Tensor a = random_nonzero({6, 50, 64}), b = random_nonzero({64, 70});
  const int threads = get_num_threads();
  set_num_threads(1);
  const Tensor one = matmul(a, b), one_batched = matmul(a, b.expand({6, 64, 70}));
  set_num_threads(std::max(threads, 2));
  const Tensor many = matmul(a, b), many_batched = matmul(a, b.expand({6, 64, 70}));
  set_num_threads(threads);
  check_matmul(one, reference_matmul(a, b), kFloat32, "1 thread");
  check_matmul(many, reference_matmul(a, b), kFloat32, "threads");
  check_matmul(one_batched, reference_matmul(a, b), kFloat32, "1 thread, batched");
  check_matmul(many_batched, reference_matmul(a, b), kFloat32, "threads, batched");
}

TEST_CASE("matmul with an empty inner dimension gives zeros", "[matmul]") {
  for (DType dt : float_dtypes()) {
    const Tensor out = matmul(empty({3, 0}, dt), empty({0, 4}, dt));
    REQUIRE(out.sizes() == Shape{3, 4});
    check_close(out, std::vector<double>(12, 0.0), dt);
    CHECK(matmul(empty({2, 0, 3}, dt), empty({3, 5}, dt)).sizes() == Shape{2, 0, 5});
  }
}

TEST_CASE("mm multiplies two matrices", "[matmul]") {
  manual_seed(4);
  for (DType dt : float_dtypes()) {
    const Tensor a = random_nonzero({6, 11}, dt), b = random_nonzero({5, 11}, dt).t();
    check_matmul(a.mm(b), reference_matmul(a, b), dt, "mm");
  }
}

TEST_CASE("bmm kernel: strided outputs and beta = 1 accumulation", "[matmul]") {
  manual_seed(5);
  for (DType dt : float_dtypes()) {
    const std::string name = dtype_name(dt);
    const Tensor a = random_nonzero({3, 19, 23}, dt), b = random_nonzero({3, 17, 23}, dt).transpose(1, 2);
    const Reference ab = reference_matmul(a, b);
    // Outputs: contiguous, column-major (a transposed buffer), and every other column
    // (no unit stride: computed in a buffer and copied back).
    const std::vector<std::pair<std::string, Tensor>> outs{
        {"contiguous", random_nonzero({3, 19, 17}, dt)},
        {"column-major", random_nonzero({3, 17, 19}, dt).transpose(1, 2)},
        {"strided", random_nonzero({3, 19, 34}, dt).slice(2, 0, 34, 2)},
    };
    for (const auto& [what, out] : outs) {
      const std::vector<double> before = values(out);
      kernels::bmm(out, a, b, /*beta=*/1);
      Reference expected = ab;
      for (size_t i = 0; i < before.size(); ++i) {
        expected.value[i] += before[i];
        expected.magnitude[i] += std::abs(before[i]) / double(expected.K);  // one more term
      }
      check_matmul(out, expected, dt, name + " beta=1 " + what);
      kernels::bmm(out, a, b, /*beta=*/0);
      check_matmul(out, ab, dt, name + " beta=0 " + what);
    }
  }
}

TEST_CASE("every GEMM build agrees with the reference for every storage order", "[matmul]") {
  // The dispatch picks one Eigen build per CPU; call each that this CPU can run directly,
  // and oneDNN's (float32 on sgemm, float64 and products under 32³ on Eigen).
  std::vector<std::pair<std::string, void (*)(const kernels::cpu::GemmArgs&)>> builds{
      {"portable", kernels::cpu::gemm_portable}, {"onednn", kernels::cpu::gemm_onednn}};
  if (kernels::cpu::cpu_has_avx512()) builds.emplace_back("avx512", kernels::cpu::gemm_avx512);
  if (kernels::cpu::cpu_has_avx2()) builds.emplace_back("avx2", kernels::cpu::gemm_avx2);
  manual_seed(6);
  // The first is past oneDNN's threshold, the second under it.
  const auto [M, N, K] = GENERATE(std::tuple<int64_t, int64_t, int64_t>{37, 29, 45}, std::tuple<int64_t, int64_t, int64_t>{7, 5, 9});
  for (DType dt : {kFloat32, kFloat64}) {
    for (const auto& [build, gemm] : builds) {
      for (int layout = 0; layout < 8; ++layout) {
        const bool a_col = layout & 1, b_col = layout & 2, c_col = layout & 4;
        // Storage wider than the matrix, so ld exceeds the inner extent.
        const Tensor a = a_col ? random_nonzero({K, M + 3}, dt).slice(1, 0, M).t()
                               : random_nonzero({M, K + 3}, dt).slice(1, 0, K);
        const Tensor b = b_col ? random_nonzero({N, K + 5}, dt).slice(1, 0, K).t()
                               : random_nonzero({K, N + 5}, dt).slice(1, 0, N);
        const Tensor c = c_col ? random_nonzero({N, M + 2}, dt).slice(1, 0, M).t()
                               : random_nonzero({M, N + 2}, dt).slice(1, 0, N);
        for (double beta : {0.0, 1.0, 0.5}) {
          const std::vector<double> c_before = values(c);
          kernels::cpu::GemmArgs g;
          g.M = M;
          g.N = N;
          g.K = K;
          g.a = {a.data(), a_col ? a.stride(1) : a.stride(0), a_col};
          g.b = {b.data(), b_col ? b.stride(1) : b.stride(0), b_col};
          g.c = c.data();
          g.ldc = c_col ? c.stride(1) : c.stride(0);
          g.c_col_major = c_col;
          g.alpha = 2.0;
          g.beta = beta;
          g.dtype = dt;
          gemm(g);
          Reference expected = reference_matmul(a, b);
          for (size_t i = 0; i < c_before.size(); ++i) {
            expected.value[i] = 2.0 * expected.value[i] + beta * c_before[i];
            expected.magnitude[i] = 2.0 * expected.magnitude[i] + std::abs(beta * c_before[i]) / double(K);
          }
          check_matmul(c, expected, dt,
                       build + " layout " + std::to_string(layout) + " beta " + std::to_string(beta));
        }
      }
    }
  }
}

TEST_CASE("the oneDNN GEMM overwrites C where beta is 0, zeroes it for an empty sum, and refuses a bad ld",
          "[matmul]") {
  manual_seed(11);
  const int64_t M = 40, N = 33, K = 50;
  const Tensor a = random_nonzero({M, K}, kFloat32), b = random_nonzero({K, N}, kFloat32);
  kernels::cpu::GemmArgs g;
  g.M = M;
  g.N = N;
  g.K = K;
  g.a = {a.data(), K, false};
  g.b = {b.data(), N, false};
  g.ldc = N;
  g.dtype = kFloat32;
  // beta 0: C's old values are never read, NaN included (BLAS's convention).
  const Tensor c = full({M, N}, std::nan(""), kFloat32);
  g.c = c.data();
  kernels::cpu::gemm_onednn(g);
  check_matmul(c, reference_matmul(a, b), kFloat32, "onednn over NaN");

  // K 0: C = zeros (sgemm itself would leave C as it was).
  kernels::cpu::GemmArgs empty_sum = g;
  empty_sum.K = 0;
  kernels::cpu::gemm_onednn(empty_sum);
  CHECK(values(c) == std::vector<double>(size_t(M * N), 0.0));

  // An ld under the row length: a typed error naming the product, C untouched.
  const Tensor before = c.clone();
  kernels::cpu::GemmArgs bad = g;
  bad.a.ld = K - 1;
  CHECK_THROWS_AS(kernels::cpu::gemm_onednn(bad), InternalError);
  CHECK_THROWS_WITH(kernels::cpu::gemm_onednn(bad), Catch::Contains("M 40, N 33, K 50"));
  CHECK(values(c) == values(before));
}

TEST_CASE("matmul gradcheck for every rank combination", "[matmul]") {
  manual_seed(7);
  const std::vector<std::pair<Shape, Shape>> cases{
      {{4}, {4}}, {{3}, {3, 2}}, {{2, 3}, {3}}, {{2, 3}, {3, 4}}, {{3}, {2, 3, 2}},
      {{2, 2, 3}, {3}}, {{2, 2, 3}, {3, 2}}, {{2, 3}, {2, 3, 2}}, {{2, 2, 3}, {2, 3, 2}},
      {{2, 1, 2, 3}, {3, 3, 2}},
  };
  for (const auto& [sa, sb] : cases) {
    INFO(shape_str(sa) << " @ " << shape_str(sb));
    CHECK(gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {leaf(sa), leaf(sb)}));
  }
  // Only one operand requiring grad.
  const Tensor b_const = random_nonzero({3, 2}, kFloat64);
  CHECK(gradcheck([&](const std::vector<Tensor>& x) { return matmul(x[0], b_const); }, {leaf({2, 2, 3})}));
}

TEST_CASE("matmul gradcheck with transposed and sliced inputs", "[matmul]") {
  manual_seed(8);
  auto f = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  CHECK(gradcheck(f, {leaf({4, 3}).t(), leaf({4, 2})}));                        // (3, 4) @ (4, 2)
  CHECK(gradcheck(f, {leaf({3, 4}), leaf({2, 4}).t()}));
  CHECK(gradcheck(f, {leaf({2, 4, 3}).transpose(1, 2), leaf({2, 2, 4}).transpose(1, 2)}));
  CHECK(gradcheck(f, {leaf({3, 8}).slice(1, 0, 8, 2), leaf({4, 3})}));  // strided a
  CHECK(gradcheck(f, {leaf({2, 3, 4}).transpose(0, 1), leaf({4, 2})}));          // batch @ matrix, not foldable
  CHECK(gradcheck([](const std::vector<Tensor>& x) { return x[0].mm(x[1]); }, {leaf({3, 2}).t(), leaf({3, 2})}));
}

TEST_CASE("matmul records one MatmulBackward node and accumulates into .grad", "[matmul]") {
  manual_seed(9);
  Tensor a = leaf({2, 3}), b = leaf({3, 4});
  Tensor out = matmul(a, b);
  REQUIRE(out.requires_grad());
  REQUIRE(out.grad_fn());
  CHECK(out.grad_fn()->name() == "MatmulBackward");
  out.mul_(3.0);  // the result is not a view: in-place ops on it keep the history
  out.sum().backward();
  // d sum(3 A B) / dA_ik = 3 sum_j B_kj; / dB_kj = 3 sum_i A_ik.
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> ga(6, 0.0), gb(12, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 4; ++j) {
        ga[size_t(i * 3 + k)] += 3 * bv[size_t(k * 4 + j)];
        gb[size_t(k * 4 + j)] += 3 * av[size_t(i * 3 + k)];
      }
  check_close(a.grad(), ga, kFloat64, "dA");
  check_close(b.grad(), gb, kFloat64, "dB");
  {
    NoGradGuard no_grad;
    CHECK_FALSE(matmul(a, b).requires_grad());
  }
}

TEST_CASE("matmul errors name the op, the shapes and the dtypes", "[matmul]") {
  require_throws_with<ShapeError>([] { matmul(zeros({64, 128}), zeros({256, 10})); },
                                  {"matmul", "(64, 128) @ (256, 10)", "inner dimensions 128 and 256 differ"});
  require_throws_with<ShapeError>([] { matmul(zeros({3}), zeros({4})); }, {"matmul", "(3,) @ (4,)", "3 and 4"});
  require_throws_with<ShapeError>([] { matmul(zeros({2, 3}), zeros({4})); }, {"matmul", "(2, 3) @ (4,)"});
  require_throws_with<ShapeError>([] { matmul(zeros({2, 3, 4}), zeros({5, 4, 6})); },
                                  {"matmul", "(2, 3, 4) @ (5, 4, 6)", "batch dimensions (2,) and (5,)"});
  require_throws_with<ShapeError>([] { matmul(zeros({}), zeros({3})); },
                                  {"matmul", "() @ (3,)", "at least 1 dimension"});
  require_throws_with<DTypeError>([] { matmul(zeros({2, 3}), zeros({3, 4}, kFloat64)); },
                                  {"matmul", "(2, 3) @ (3, 4)", "float32", "float64"});
  require_throws_with<DTypeError>([] { matmul(zeros({2, 3}, kInt64), zeros({3, 4}, kInt64)); },
                                  {"matmul", "(2, 3) @ (3, 4)", "int64", "floating-point"});
  require_throws_with<DTypeError>([] { zeros({2, 3}, kBool).matmul(zeros({3}, kBool)); }, {"matmul", "bool"});
  require_throws_with<ShapeError>([] { zeros({2, 2, 3}).mm(zeros({3, 4})); }, {"mm", "(2, 2, 3) @ (3, 4)", "2-D"});
  require_throws_with<ShapeError>([] { zeros({2, 3}).mm(zeros({2, 4})); }, {"mm", "(2, 3) @ (2, 4)", "3 and 2"});
  require_throws_with<ShapeError>([] { kernels::bmm(zeros({2, 3, 5}), zeros({2, 3, 4}), zeros({2, 5, 5})); },
                                  {"bmm", "(2, 3, 4) @ (2, 5, 5)", "(2, 3, 5)"});
  require_throws_with<DTypeError>(
      [] { kernels::bmm(zeros({1, 2, 2}), zeros({1, 2, 2}), zeros({1, 2, 2}, kFloat64)); },
                                  {"bmm", "float32", "float64"});
  require_throws_with<ValueError>([] { kernels::bmm(zeros({1, 2, 2}), zeros({1, 2, 2}), zeros({1, 2, 2}), 2.0); },
                                  {"bmm", "beta"});
}
