// Deterministic mode on a GPU (Note [deterministic algorithms] in core/deterministic.h):
// cuDNN's attention backward, built with its deterministic algorithm, and a cuDNN LSTM,
// on STANDARD, each run twice on the same inputs must give the same bits, and stay close
// to an independent reference (the composition of ops in float32; the CPU's LSTM). The
// host-side rules are in test_deterministic.cpp and test_cudnn_rnn.cpp. "[.cuda]": skipped
// without a GPU; scripts/gpu-check.sh runs these by name ("cuda deterministic*").
#include "catch2_compat.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/deterministic.h"
#include "cuda_test_util.h"
#include "kernels/attention/attention_backend.h"
#include "kernels/attention/cudnn_attention_plan.h"
#include "kernels/rnn/cudnn_rnn_plan.h"
#include "loom.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

struct DeterministicGuard {
  bool mode = are_deterministic_algorithms_enabled(), warn = is_deterministic_algorithms_warn_only_enabled();
  ~DeterministicGuard() { use_deterministic_algorithms(mode, warn); }
};

// How many elements of a and b (same dtype and shape) differ in their bits.
int64_t differing_elements(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  REQUIRE(a.dtype() == b.dtype());
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  const size_t item = size_t(x.nbytes() / std::max<int64_t>(x.numel(), 1));
  const char* p = static_cast<const char*>(x.data());
  const char* q = static_cast<const char*>(y.data());
  int64_t n = 0;
  for (int64_t i = 0; i < x.numel(); ++i) n += std::memcmp(p + size_t(i) * item, q + size_t(i) * item, item) != 0;
  return n;
}

// |got - want| <= tol · (max|want| + |want|) elementwise (the 16-bit gradients are sums of
// many rounded products: their error scales with the largest, as in test_attention_cuda.cpp).
void check_close_to(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  const std::vector<double> g = got.to(kFloat64).cpu().to_vector<double>(), w = want.to(kFloat64).cpu().to_vector<double>();
  REQUIRE(g.size() == w.size());
  double scale = 0;
  for (double v : w) scale = std::max(scale, std::abs(v));
  REQUIRE(scale > 0);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::abs(g[i] - w[i]) <= tol * (scale + std::abs(w[i]))) continue;  // NaN fails
    FAIL(what << " element " << i << ": got " << g[i] << ", expected " << w[i] << " (largest |expected| " << scale
              << ")");
  }
}

}  // namespace

TEST_CASE("cuda deterministic: cuDNN attention's backward gives the same dq, dk and dv twice", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const DeterministicGuard restore;
  manual_seed(61);
  // Many tiles of keys for each row of queries (S = 1024): cuDNN's default backward adds
  // each tile's share of dq with atomics, in whatever order the tiles finish.
  const int64_t B = 2, H = 8, L = 512, S = 1024, E = 64;
  for (DType dtype : {kBFloat16, kFloat16}) {
    INFO(dtype_name(dtype));
    const Tensor q = random_nonzero({B, H, L, E}, dtype, -1, 1).to(kCUDA),
                 k = random_nonzero({B, H, S, E}, dtype, -1, 1).to(kCUDA),
                 v = random_nonzero({B, H, S, E}, dtype, -1, 1).to(kCUDA),
                 gy = random_nonzero({B, H, L, E}, dtype, -1, 1).to(kCUDA);
    // dq, dk, dv of one call on `tier` (forced: a refusal throws, naming why).
    auto grads = [&](kernels::SDPBackend tier, const Tensor& q0, const Tensor& k0, const Tensor& v0,
                     const Tensor& g0) {
      const kernels::SdpaKernelGuard only(tier);
      const Tensor qg = q0.detach().requires_grad_(true), kg = k0.detach().requires_grad_(true),
                   vg = v0.detach().requires_grad_(true);
      F::scaled_dot_product_attention(qg, kg, vg).backward(g0);
      return std::array<Tensor, 3>{qg.grad(), kg.grad(), vg.grad()};
    };
    const auto cudnn = [&] { return grads(kernels::SDPBackend::CUDNN_ATTENTION, q, k, v, gy); };
    const char* names[] = {"dq", "dk", "dv"};

    use_deterministic_algorithms(true);
    const size_t before = kernels::cudnn_attention_graphs_built();
    const auto first = cudnn();
    CHECK(kernels::cudnn_attention_graphs_built() - before == 2);  // the forward and the deterministic backward
    const auto second = cudnn();
    for (int i = 0; i < 3; ++i) {
      INFO(names[i]);
      CHECK(differing_elements(first[size_t(i)], second[size_t(i)]) == 0);
    }
    // Against the composition of ops in float32 from the same rounded inputs.
    const auto ref = grads(kernels::SDPBackend::MATH, q.to(kFloat32), k.to(kFloat32), v.to(kFloat32),
                           gy.to(kFloat32));
    const double tol = dtype == kFloat16 ? 5e-3 : 3e-2;
    for (int i = 0; i < 3; ++i) check_close_to(first[size_t(i)], ref[size_t(i)], tol, names[i]);

    // With the mode off the same call is another plan (the default backward), and one built
    // with the mode on again is found, not rebuilt.
    use_deterministic_algorithms(false);
    const size_t on_built = kernels::cudnn_attention_graphs_built();
    const auto off1 = cudnn();
    CHECK(kernels::cudnn_attention_graphs_built() - on_built == 2);
    const auto off2 = cudnn();
    use_deterministic_algorithms(true);
    const auto third = cudnn();
    CHECK(kernels::cudnn_attention_graphs_built() - on_built == 2);
    CHECK(differing_elements(first[0], third[0]) == 0);
    // Measured, not required: whether the default algorithm's dq differed between two runs
    // here (for docs/reproducibility.md).
    std::printf("measured (%s, B %lld H %lld L %lld S %lld E %lld): default backward dq differs in %lld of %lld "
                "elements between two runs\n",
                dtype_name(dtype), (long long)B, (long long)H, (long long)L, (long long)S, (long long)E,
                (long long)differing_elements(off1[0], off2[0]), (long long)off1[0].numel());
  }
}

TEST_CASE("cuda deterministic: a cuDNN LSTM's forward and backward give the same bits twice", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDNN();
  const DeterministicGuard restore;
  use_deterministic_algorithms(true);
  manual_seed(62);
  // Hidden 128 in float32 for training: the rule's choice without the mode is
  // PERSIST_STATIC_SMALL_H (Note [cuDNN RNN algorithm rule]); the mode runs STANDARD.
  nn::LSTM cpu(nn::RNNOptions(64, 128).num_layers(2));
  nn::LSTM gpu(nn::RNNOptions(64, 128).num_layers(2));
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(kCUDA);
  const int64_t T = 60, Bn = 32;
  const Tensor x = random_nonzero({T, Bn, 64}, kFloat32, -1, 1), gy = random_nonzero({T, Bn, 128}, kFloat32, -1, 1);
  // Output, final states, the input's and every parameter's gradient.
  auto run = [&](nn::LSTM& lstm, Device device) {
    for (Tensor& p : lstm->parameters()) p.mutable_grad() = Tensor();
    const Tensor xg = x.to(device).detach().requires_grad_(true);
    const nn::RNNOutput out = lstm(xg);
    (out.output * gy.to(device)).sum().backward();
    std::vector<Tensor> all{out.output.detach(), out.h_n.detach(), out.c_n.detach(), xg.grad()};
    for (const Tensor& p : lstm->parameters()) all.push_back(p.grad());
    return all;
  };
  const auto first = run(gpu, kCUDA);
  CHECK(kernels::cuda::cudnn_rnn_counters().last_algo == kernels::cuda::CudnnRNNAlgo::Standard);
  const auto second = run(gpu, kCUDA);
  const auto want = run(cpu, kCPU);
  REQUIRE(first.size() == second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    INFO("tensor " << i << " (output, h_n, c_n, x.grad, then the parameters' grads)");
    CHECK(differing_elements(first[i], second[i]) == 0);
    check_close_to(first[i], want[i], 1e-4, "against the CPU");
  }
}
