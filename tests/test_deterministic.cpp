// Deterministic mode (core/deterministic.h): the switch and warn_only; the alert's raise and
// warning naming the op; the CUDA rules checked on the host (scatter-adds in order for
// floats, Loom's fused attention tier refused when its backward will run while cuDNN's
// stays, seen through the emulated cuda:0; cuDNN attention plans keyed by the mode); and
// training on the CPU giving the same bits at 1 and 2 threads. The cuDNN RNN algorithm rule
// under the mode is in test_cudnn_rnn.cpp, the GPU runs in test_deterministic_cuda.cpp.
#include <cstring>

#include "test_util.h"

#include "core/cuda_emulation.h"
#include "core/deterministic.h"
#include "core/parallel.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_backend.h"
#include "kernels/attention/cudnn_attention_plan.h"
#include "kernels/cpu/gemm.h"
#include "kernels/support/lru_cache.h"
#include "kernels/support/scatter_add_rule.h"
#include "nn/functional.h"
#include "nn/transformer.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"

using namespace loom;
using namespace loom::test;

namespace {

// Restores the mode a test changed.
struct DeterministicGuard {
  bool mode = are_deterministic_algorithms_enabled(), warn = is_deterministic_algorithms_warn_only_enabled();
  ~DeterministicGuard() { use_deterministic_algorithms(mode, warn); }
};

}  // namespace

TEST_CASE("use_deterministic_algorithms: the switch, warn_only and the alert", "[deterministic]") {
  const DeterministicGuard restore;
  use_deterministic_algorithms(false);
  CHECK_FALSE(are_deterministic_algorithms_enabled());
  alert_not_deterministic("some_op");  // off: nothing
  use_deterministic_algorithms(true);
  CHECK(are_deterministic_algorithms_enabled());
  CHECK_FALSE(is_deterministic_algorithms_warn_only_enabled());
  require_throws_with<NotImplementedError>([] { alert_not_deterministic("some_op"); },
                                           {"some_op", "deterministic implementation", "warn_only"});
  use_deterministic_algorithms(true, /*warn_only=*/true);
  CHECK(is_deterministic_algorithms_warn_only_enabled());
  alert_not_deterministic("some_op");  // warns, runs on
  use_deterministic_algorithms(false, true);
  CHECK_FALSE(is_deterministic_algorithms_warn_only_enabled());  // warn_only means nothing when off
}

TEST_CASE("deterministic mode: CUDA scatter-adds of floats add in order, integers keep their exact atomics",
          "[deterministic]") {
  const DeterministicGuard restore;
  for (bool mode : {false, true}) {
    use_deterministic_algorithms(mode);
    for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
      INFO(dtype_name(d) << (mode ? " deterministic" : ""));
      const bool half = d == kFloat16 || d == kBFloat16;
      CHECK(kernels::scatter_add_in_order(d) == (half || (mode && is_floating_point(d))));
    }
  }
}

TEST_CASE("deterministic mode: the CPU GEMMs' one block rule", "[deterministic]") {
  using kernels::cpu::gemm_row_block;
  using kernels::cpu::kDeterministicGemmBlock;
  REQUIRE(kDeterministicGemmBlock == 512);
  // (extent, the block in deterministic mode): 512 rows, or no split where one block holds them.
  const std::pair<int64_t, int64_t> cases[] = {{1, 0}, {300, 0}, {512, 0}, {513, 512}, {5000, 512}};
  for (const auto& [extent, fixed] : cases) {
    for (int64_t by_threads : {int64_t(0), int64_t(64), int64_t(2500)}) {
      INFO("extent " << extent << ", by the threads " << by_threads);
      CHECK(gemm_row_block(extent, by_threads, false) == by_threads);  // off: the caller's split
      CHECK(gemm_row_block(extent, by_threads, true) == fixed);        // on: whatever the threads
    }
  }
}

TEST_CASE("deterministic mode: the fused attention tier each mode allows, forward only and with a backward",
          "[deterministic]") {
  using kernels::SDPBackend;
  using kernels::deterministic_attention_refusal;
  for (bool mode : {false, true}) {
    for (bool on_gpu : {false, true}) {
      for (bool backward : {false, true}) {
        INFO((mode ? "deterministic" : "off") << (on_gpu ? ", GPU" : ", CPU") << (backward ? ", backward" : ""));
        // Only Loom's fused CUDA backward (atomics on dq) is refused; cuDNN's backward takes
        // its deterministic algorithm, the CPU's adds in a fixed order.
        const std::string flash = deterministic_attention_refusal(SDPBackend::FLASH_ATTENTION, on_gpu, backward, mode);
        CHECK(flash.empty() == !(mode && on_gpu && backward));
        CHECK(deterministic_attention_refusal(SDPBackend::CUDNN_ATTENTION, on_gpu, backward, mode).empty());
        CHECK(deterministic_attention_refusal(SDPBackend::MATH, on_gpu, backward, mode).empty());
      }
    }
  }
}

TEST_CASE("deterministic mode: a cuDNN attention plan is keyed by the mode", "[deterministic]") {
  const DeterministicGuard restore;
  manual_seed(5);
  const Tensor q = random_nonzero({2, 4, 16, 64}, kBFloat16), k = random_nonzero({2, 4, 24, 64}, kBFloat16),
               v = random_nonzero({2, 4, 24, 64}, kBFloat16);
  use_deterministic_algorithms(false);
  const kernels::AttentionSignature off = kernels::attention_signature(q, k, v, Tensor(), Tensor(), false, 0.0);
  use_deterministic_algorithms(true);
  const kernels::AttentionSignature on = kernels::attention_signature(q, k, v, Tensor(), Tensor(), false, 0.0);
  use_deterministic_algorithms(true, /*warn_only=*/true);  // warn_only: the deterministic graph too
  const kernels::AttentionSignature warn = kernels::attention_signature(q, k, v, Tensor(), Tensor(), false, 0.0);
  CHECK_FALSE(off.deterministic);
  CHECK(on.deterministic);
  CHECK(warn == on);
  // The same call in the other mode is another plan: only the flag tells them apart.
  CHECK_FALSE(off == on);
  kernels::AttentionSignature flipped = off;
  flipped.deterministic = true;
  CHECK(flipped == on);
  const kernels::AttentionSignatureHash hash;
  CHECK(hash(off) != hash(on));
  CHECK(hash(flipped) == hash(on));
  // A plan cache holds both, each found under its own key.
  kernels::LruCache<kernels::AttentionSignature, int, kernels::AttentionSignatureHash> cache(4);
  cache.insert(off, 1);
  cache.insert(on, 2);
  REQUIRE(cache.find(off) != nullptr);
  REQUIRE(cache.find(on) != nullptr);
  CHECK(*cache.find(off) == 1);
  CHECK(*cache.find(on) == 2);
}

// Through the emulated cuda:0, which only a build without the CUDA backend has.
#ifndef LOOM_WITH_CUDA
TEST_CASE("deterministic mode: attention whose backward runs on cuda:0 skips Loom's fused tier, keeps cuDNN's",
          "[deterministic][cuda_emulation]") {
  const DeterministicGuard restore;
  cuda::EmulationGuard emulate;
  manual_seed(3);
  const TensorOptions on_gpu = TensorOptions().device(kCUDA);
  const Tensor q = randn({2, 4, 8, 16}, on_gpu), k = randn({2, 4, 8, 16}, on_gpu), v = randn({2, 4, 8, 16}, on_gpu);
  for (bool backward : {false, true}) {
    for (bool mode : {false, true}) {
      INFO((backward ? "backward" : "forward only") << (mode ? ", deterministic" : ""));
      use_deterministic_algorithms(mode);
      const std::string why =
          kernels::attention_refusal(kernels::SDPBackend::FLASH_ATTENTION, q, k, v, Tensor(), false, 0.0, backward);
      CHECK((why.find("deterministic") != std::string::npos) == (mode && backward));
      CHECK(kernels::attention_refusal(kernels::SDPBackend::MATH, q, k, v, Tensor(), false, 0.0, backward).empty());
      // cuDNN's tier is not refused for the mode (the emulated device has no cuDNN: that is
      // its only reason).
      CHECK(kernels::attention_refusal(kernels::SDPBackend::CUDNN_ATTENTION, q, k, v, Tensor(), false, 0.0, backward)
                .find("deterministic") == std::string::npos);
      CHECK(kernels::attention_refusal(kernels::SDPBackend::FLASH_ATTENTION, q.cpu(), k.cpu(), v.cpu(), Tensor(), false,
                                       0.0, backward)
                .find("deterministic") == std::string::npos);  // the CPU's fused backward has no atomics
    }
  }
  // Through scaled_dot_product_attention: with only the fused tier allowed, a call whose
  // backward will run has no kernel left and says why.
  use_deterministic_algorithms(true);
  const kernels::SdpaKernelGuard only_flash(kernels::SDPBackend::FLASH_ATTENTION);
  const Tensor qg = q.detach().requires_grad_(true);
  require_throws_with<NotImplementedError>([&] { nn::functional::scaled_dot_product_attention(qg, k, v); },
                                           {"no available kernel", "deterministic algorithms are on"});
  CHECK(nn::functional::scaled_dot_product_attention(q, k, v).sizes() == q.sizes());  // no backward: fused
}
#endif

TEST_CASE("deterministic mode: training on the CPU gives the same bits at 1 and 2 threads", "[deterministic]") {
  const DeterministicGuard restore;
  use_deterministic_algorithms(true);
  const int threads = get_num_threads();
  const auto train = [](uint64_t seed) {
    manual_seed(seed);
    nn::TransformerEncoder encoder(nn::TransformerEncoderOptions(
        nn::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64).dropout(0.1).batch_first(true), 2));
    optim::Adam adam(encoder->parameters(), optim::AdamOptions(1e-3));
    const Tensor x = random_nonzero({8, 40, 32}), target = random_nonzero({8, 40, 32});
    for (int step = 0; step < 3; ++step) {
      adam.zero_grad();
      (encoder(x) - target).pow(2.0).mean().backward();
      optim::clip_grad_norm_(encoder->parameters(), 0.5);
      adam.step();
    }
    std::vector<std::string> bytes;
    for (const Tensor& p : encoder->parameters())
      bytes.emplace_back(static_cast<const char*>(p.data()), size_t(p.nbytes()));
    return bytes;
  };
  for (uint64_t seed : {11, 12}) {
    INFO("seed " << seed);
    set_num_threads(1);
    const auto one = train(seed);
    set_num_threads(2);
    const auto two = train(seed);
    set_num_threads(threads);
    REQUIRE(one.size() == two.size());
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("parameter " << i);
      CHECK(one[i] == two[i]);
    }
  }
}
