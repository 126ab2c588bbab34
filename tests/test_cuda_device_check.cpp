// Deferred range checks on a GPU (Note [deferred device checks] in kernels/support/device_check.h):
// an out-of-range index or class target costs no host sync where it is used, and the next
// call that waits for the device throws the IndexError the CPU throws at once (the CPU's
// message is its beginning), once; the process goes on working. The CPU's eager checks are
// the reference.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/kernels.h"
#include "test_util.h"
#include "thrown_message.h"

using namespace loom;
using loom::test::require_throws_with;

namespace {

// The IndexError message of an eager CPU call.
std::string cpu_message(const std::function<void()>& f) { return test::thrown_message<IndexError>(f); }

// Runs `queue` (the same call on GPU tensors) with no host sync and no throw, then requires
// the next synchronize() to throw the CPU's message, and the one after it nothing.
void require_deferred(const std::function<void()>& queue, const std::string& cpu, const char* op) {
  const uint64_t before = cuda::host_sync_count();
  REQUIRE_NOTHROW(queue());
  CHECK(cuda::host_sync_count() == before);  // the check waited for nothing
  try {
    cuda::synchronize();
    FAIL(op << ": synchronize() did not throw");
  } catch (const IndexError& e) {
    const std::string got = e.what();
    INFO("cuda: " << got << "\ncpu:  " << cpu);
    CHECK(got.rfind(cpu, 0) == 0);  // the CPU's message, then where and when it was found
    CHECK(got.find("cuda:0") != std::string::npos);
    CHECK(got.find("cuda::synchronize") != std::string::npos);
  }
  CHECK_NOTHROW(cuda::synchronize());  // once
}

Tensor on_gpu(const Tensor& t) { return t.to(kCUDA); }

}  // namespace

TEST_CASE("cuda device checks: each indexing op's bad index is raised at the next sync, as the CPU raises it",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(5);
  const Tensor x = test::random_nonzero({4, 5});
  for (DType itype : {kInt64, kInt32}) {
    INFO(dtype_name(itype));
    const Tensor row_idx = tensor<int64_t>({1, 4, 2}).to(itype);           // 4 is out of range for dim 0
    const Tensor gather_idx = tensor<int64_t>({0, 5, 1, -2}, {2, 2}).to(itype);  // 5 first, row-major
    const Tensor scatter_idx = tensor<int64_t>({3, 0}, {1, 2}).to(itype);
    require_deferred([&] { (void)on_gpu(x).index_select(0, on_gpu(row_idx)); },
                     cpu_message([&] { (void)x.index_select(0, row_idx); }), "index_select");
    require_deferred([&] { (void)on_gpu(x).gather(1, on_gpu(gather_idx)); },
                     cpu_message([&] { (void)x.gather(1, gather_idx); }), "gather");
    require_deferred([&] { (void)on_gpu(x.narrow(0, 0, 3)).scatter_add(0, on_gpu(scatter_idx), on_gpu(x)); },
                     cpu_message([&] { (void)x.narrow(0, 0, 3).scatter_add(0, scatter_idx, x); }), "scatter_add");
    require_deferred([&] { (void)embedding(on_gpu(x), on_gpu(row_idx)); },
                     cpu_message([&] { (void)embedding(x, row_idx); }), "embedding");
    require_deferred([&] { (void)one_hot(on_gpu(row_idx), 3); }, cpu_message([&] { (void)one_hot(row_idx, 3); }),
                     "one_hot");
    require_deferred([&] { kernels::check_indices(on_gpu(gather_idx), 5, "myop"); },
                     cpu_message([&] { kernels::check_indices(gather_idx, 5, "myop"); }), "check_indices");
  }
}

TEST_CASE("cuda device checks: a class target out of range is raised at the next sync, ignore_index is exempt",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  namespace F = nn::functional;
  const Tensor scores = test::random_nonzero({4, 3});
  for (const int64_t bad : {3, -2}) {
    const Tensor target = tensor<int64_t>({0, bad, 2, 1});  // one bad target: both devices name it
    require_deferred([&] { (void)F::cross_entropy(on_gpu(scores), on_gpu(target)); },
                     cpu_message([&] { (void)F::cross_entropy(scores, target); }), "cross_entropy");
    require_deferred([&] { (void)F::nll_loss(on_gpu(scores.log_softmax(1)), on_gpu(target)); },
                     cpu_message([&] { (void)F::nll_loss(scores.log_softmax(1), target); }), "nll_loss");
  }
  // ignore_index rows pass, and the loss equals the CPU's.
  const Tensor ignored = tensor<int64_t>({0, -100, 2, -100});
  const double want = F::cross_entropy(scores, ignored).item<double>();
  const uint64_t before = cuda::host_sync_count();
  const Tensor got = F::cross_entropy(on_gpu(scores), on_gpu(ignored));
  CHECK(cuda::host_sync_count() == before);
  CHECK(std::abs(got.item<double>() - want) <= 1e-6 * std::abs(want));
  const Tensor custom = tensor<int64_t>({-1, 1, -1, 0});
  CHECK_NOTHROW(F::cross_entropy(on_gpu(scores), on_gpu(custom), nn::CrossEntropyLossOptions().ignore_index(-1))
                    .item<double>());
}

TEST_CASE("cuda device checks: every waiting call reports, the first failing launch wins, the process goes on",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const Tensor x = on_gpu(test::random_nonzero({6, 3}));
  const Tensor bad7 = on_gpu(tensor<int64_t>({7})), bad9 = on_gpu(tensor<int64_t>({9}));
  // Each kind of wait raises: item(), to_vector() (a copy to the host), synchronize() of the
  // device, of a stream and of an event.
  const std::vector<std::pair<std::string, std::function<void(const Tensor&)>>> waits{
      {"a copy from the GPU to the host", [](const Tensor& t) { (void)t.sum().item<float>(); }},
      {"a copy from the GPU to the host", [](const Tensor& t) { (void)t.to_vector<float>(); }},
      {"cuda::synchronize", [](const Tensor&) { cuda::synchronize(); }},
      {"cuda::Stream::synchronize", [](const Tensor&) { cuda::Stream::current().synchronize(); }},
      {"cuda::Event::synchronize", [](const Tensor&) {
         cuda::Event done;
         done.record();
         done.synchronize();
       }}};
  for (const auto& [where, wait] : waits) {
    INFO(where);
    const Tensor picked = x.index_select(0, bad7);
    require_throws_with<IndexError>([&] { wait(picked); }, {"index_select", "index 7", "[0, 6)", where});
    CHECK_NOTHROW(wait(picked));  // raised once
  }
  // Two failures before a wait: the first launch's is reported, then none.
  (void)x.index_select(0, bad7);
  (void)x.index_select(0, bad9);
  require_throws_with<IndexError>([] { cuda::synchronize(); }, {"index 7"});
  CHECK_NOTHROW(cuda::synchronize());
  // The process is usable: good ops give the CPU's results, a later failure is raised again.
  const Tensor good = tensor<int64_t>({5, 0, 2});
  CHECK(x.index_select(0, on_gpu(good)).cpu().to_vector<float>() == x.cpu().index_select(0, good).to_vector<float>());
  (void)x.gather(1, on_gpu(tensor<int64_t>({0, 3}, {1, 2})));
  require_throws_with<IndexError>([] { cuda::synchronize(); }, {"gather", "index 3", "[0, 3)"});
}

TEST_CASE("cuda device checks: the first bad element over many blocks and any strides, and the op reads zero there",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const int64_t n = 3'000'000;  // many blocks, each thread several elements
  for (DType itype : {kInt64, kInt32}) {
    INFO(dtype_name(itype));
    Tensor index = randint(0, 10, {n}).to(itype);
    index.narrow(0, 2'900'000, 1).fill_(-5);  // later, in another block
    index.narrow(0, 1'234'567, 1).fill_(11);  // the first bad one
    index.narrow(0, 2'000'001, 1).fill_(12);
    require_throws_with<IndexError>(
        [&] {
          kernels::check_indices(on_gpu(index), 10, "big");
          cuda::synchronize();
        },
        {"big: index 11 is out of range", "element 1234567"});
  }
  // A transposed index: positions are row-major over its shape, as the CPU reports them.
  const Tensor t = on_gpu(tensor<int64_t>({0, 9, 2, 3, 4, 8}, {2, 3})).t();  // (3, 2): rows (0 3), (9 4), (2 8)
  REQUIRE_FALSE(t.is_contiguous());
  require_throws_with<IndexError>(
      [&] {
        kernels::check_indices(t, 5, "strided");
        cuda::synchronize();
      },
      {"strided: index 9", "element 2"});
  // While the error waits, the gather that used the bad index read zero there and the right
  // values elsewhere.
  const Tensor x = test::random_nonzero({3, 4});
  const Tensor idx = tensor<int64_t>({1, 9, 0}, {3, 1});
  const Tensor got = on_gpu(x).gather(1, on_gpu(idx));
  REQUIRE_THROWS_AS(cuda::synchronize(), IndexError);
  const std::vector<float> values = got.cpu().to_vector<float>(), xs = x.to_vector<float>();
  CHECK(values == std::vector<float>{xs[1], 0.0f, xs[8]});
}
