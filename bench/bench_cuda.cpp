// GPU kernel benchmarks (issue "CUDA backend"), JSON lines as bench/bench_util.h. Each
// memory-bound kernel is reported against the device-to-device copy bandwidth measured
// in the same run (its "ceiling"); GEMMs in TFLOP/s, compared with PyTorch by running
// bench/torch_cuda_bench.py beside it (scripts/gpu-check.sh does both).
//
//   copy      256 MB float32, dst.copy_(src)            bytes = 2 · size
//   add       a + b over 256 MB each                     bytes = 3 · size   goal ≥ 85 % of copy
//   softmax   rows of 4096, 256 MB                       bytes = 2 · size   goal ≥ 70 %
//   sum       full reduction of 256 MB                   bytes = size       goal ≥ 80 %
//   gemm      4096³ float32 (TF32 off, on) and bfloat16  2 · n³ flops       goal: PyTorch ± 5 %
//   sdpa_fwd  attention forward, bfloat16, B 8, H 16,    4 · B·H·L·S·E      goal: 0.95 × PyTorch's
//             L = S = 4096, E 128 (and causal), the      flops, half causal fastest backend
//             tier that runs by default
//   sdpa_fwd / sdpa_fwdbwd with "tier": the same         forward + backward
//             forward, and forward + backward, with      14 · B·H·L·S·E
//             each tier forced (CUDNN_ATTENTION,
//             FLASH_ATTENTION, MATH; Note [attention
//             tiers]); torch_cuda_bench.py prints
//             PyTorch's per backend beside them
//   alloc     one cached allocate + free pair of 1 MiB   ns                 goal ≤ 1000 ns
//   and throughput_lines' (issue 28), goal ≥ 0.95 of PyTorch's GB/s in the same run:
//   layer_norm_fwd   (65536, 1024) float32, weight and bias      bytes = 2 · size (x read, y written)
//   layer_norm_bwd   its dx, dweight and dbias                   bytes = 3 · size (dy, x read, dx written)
//   bias_grad        sum over dim 0 of (65536, 1024) float32     bytes = size
//   log_softmax_bwd  rows of 4096, 256 MB                        bytes = 3 · size (g, y read, gx written)
//
// Without a GPU it says so and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/allocator.h"
#include "core/cuda.h"
#include "kernels/attention/attention_backend.h"
#include "kernels/kernels.h"
#include "kernels/norm/layer_norm.h"
#include "loom.h"

using namespace loom;

namespace {

// Median milliseconds of fn() on the current stream, timed with CUDA events.
template <typename F>
double median_ms(F&& fn, int warmup = 3, int reps = 20) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    cuda::Event start(true), stop(true);
    start.record();
    fn();
    stop.record();
    stop.synchronize();
    ms.push_back(start.elapsed_ms(stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void line(const char* bench, int64_t size, const char* dtype, double value, const char* unit,
          double ceiling = 0) {
  bench::print({bench, "loom", size, dtype, 0, value, unit, ceiling});
}

// Issue 28's lines: the fused layer norm, a bias gradient and log_softmax's backward, each
// against copy_gbs (bench/torch_cuda_bench.py prints PyTorch's beside them).
void throughput_lines(double copy_gbs) {
  const TensorOptions on_gpu = TensorOptions().device(kCUDA);
  const int64_t rows = 65536, n = 1024;  // 256 MB of float32
  const double bytes = double(rows * n) * 4;
  NoGradGuard no_grad;
  const Tensor x = randn({rows, n}, on_gpu), dy = randn({rows, n}, on_gpu);
  const Tensor w = randn({n}, on_gpu), b = randn({n}, on_gpu);
  line("layer_norm_fwd", rows * n, "float32",
       2 * bytes / median_ms([&] { Tensor y = nn::functional::layer_norm(x, {n}, w, b, 1e-5); }) / 1e6, "GB/s",
       copy_gbs);
  Tensor y = empty({rows, n}, on_gpu), mean = empty({rows}, on_gpu), rstd = empty({rows}, on_gpu);
  kernels::layer_norm_forward(y, mean, rstd, x, w, b, 1e-5);
  Tensor dx = empty({rows, n}, on_gpu), dw = empty({n}, on_gpu), db = empty({n}, on_gpu);
  line("layer_norm_bwd", rows * n, "float32",
       3 * bytes / median_ms([&] { kernels::layer_norm_backward(dx, dw, db, dy, x, mean, rstd, w); }) / 1e6, "GB/s",
       copy_gbs);
  line("bias_grad", rows * n, "float32", bytes / median_ms([&] { Tensor s = x.sum(0); }) / 1e6, "GB/s", copy_gbs);
  const Tensor out = randn({rows * n / 4096, 4096}, on_gpu).log_softmax(1), g = randn(out.sizes(), on_gpu);
  Tensor gx = empty(out.sizes(), on_gpu);
  line("log_softmax_bwd", rows * n, "float32",
       3 * bytes / median_ms([&] { kernels::softmax_backward(gx, g, out, 1, true); }) / 1e6, "GB/s", copy_gbs);
}

// The attention tier a call on q, k, v runs on (Note [attention tiers]): read off the node
// its forward records.
kernels::SDPBackend tier_that_runs(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const Tensor out = nn::functional::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
  for (std::shared_ptr<Node> node = out.grad_fn(); node;
       node = node->next_edges().empty() ? nullptr : node->next_edges()[0].fn) {
    if (node->name() == "ScaledDotProductCudnnAttentionBackward") return kernels::SDPBackend::CUDNN_ATTENTION;
    if (node->name() == "ScaledDotProductAttentionBackward") return kernels::SDPBackend::FLASH_ATTENTION;
  }
  return kernels::SDPBackend::MATH;
}

}  // namespace

int main() {
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench_cuda: no CUDA device (%s); nothing to measure\n",
                 built_with_cuda() ? "none found" : "Loom was built without CUDA");
    return 0;
  }
  const TensorOptions on_gpu = TensorOptions().device(kCUDA);
  const int64_t n = 64 << 20;  // 64 Mi float32 = 256 MB
  const double bytes = double(n) * 4;

  Tensor src = randn({n}, on_gpu), dst = empty({n}, on_gpu);
  const double copy_gbs = 2 * bytes / median_ms([&] { dst.copy_(src); }) / 1e6;
  line("copy", n, "float32", copy_gbs, "GB/s");

  Tensor a = randn({n}, on_gpu), b = randn({n}, on_gpu);
  line("add", n, "float32", 3 * bytes / median_ms([&] { Tensor c = a + b; }) / 1e6, "GB/s", copy_gbs);

  Tensor rows = randn({n / 4096, 4096}, on_gpu);
  line("softmax", n, "float32", 2 * bytes / median_ms([&] { Tensor y = rows.softmax(1); }) / 1e6, "GB/s",
       copy_gbs);
  line("sum", n, "float32", bytes / median_ms([&] { Tensor s = a.sum(); }) / 1e6, "GB/s", copy_gbs);

  const int64_t m = 4096;
  const double flops = 2.0 * double(m) * double(m) * double(m);
  for (auto [dtype, tf32, name] : {std::tuple{kFloat32, false, "float32"}, std::tuple{kFloat32, true, "tf32"},
                                   std::tuple{kBFloat16, false, "bfloat16"}}) {
    cuda::set_allow_tf32(tf32);
    Tensor x = randn({m, m}, on_gpu).to(dtype), y = randn({m, m}, on_gpu).to(dtype);
    line("gemm", m, name, flops / median_ms([&] { Tensor z = x.matmul(y); }) / 1e9, "TFLOP/s");
  }
  cuda::set_allow_tf32(false);

  // Attention: the forward is two products of 2 · L·S·E flops per (batch, head), the backward
  // five; causal skips the tiles above the diagonal, so it counts half. First the tier that
  // runs by default, then each tier forced (Note [attention tiers]).
  {
    const int64_t B = 8, H = 16, L = 4096, E = 128;
    const Tensor q = randn({B, H, L, E}, on_gpu).to(kBFloat16), k = randn({B, H, L, E}, on_gpu).to(kBFloat16),
                 v = randn({B, H, L, E}, on_gpu).to(kBFloat16), gy = randn({B, H, L, E}, on_gpu).to(kBFloat16);
    const double forward_flops = 4.0 * double(B * H) * double(L) * double(L) * double(E);
    Tensor qg = q.detach().requires_grad_(true), kg = k.detach().requires_grad_(true),
           vg = v.detach().requires_grad_(true);
    auto forward = [&](bool causal) {
      NoGradGuard no_grad;
      Tensor o = nn::functional::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
    };
    auto forward_backward = [&](bool causal) {
      nn::functional::scaled_dot_product_attention(qg, kg, vg, Tensor(), 0.0, causal).backward(gy);
      for (Tensor* t : {&qg, &kg, &vg}) t->mutable_grad() = Tensor();
    };
    for (bool causal : {false, true}) {
      const std::string tier = std::string(",\"tier\":\"") + kernels::sdp_backend_name(tier_that_runs(qg, kg, vg, causal)) + "\"";
      bench::print({causal ? "sdpa_fwd_causal" : "sdpa_fwd", "loom", L, "bfloat16", 0,
                    forward_flops / (causal ? 2 : 1) / median_ms([&] { forward(causal); }) / 1e9, "TFLOP/s", 0,
                    tier.c_str()});
    }
    for (kernels::SDPBackend backend : {kernels::SDPBackend::CUDNN_ATTENTION, kernels::SDPBackend::FLASH_ATTENTION,
                                        kernels::SDPBackend::MATH}) {
      kernels::SdpaKernelGuard only(backend);
      const std::string tier = std::string(",\"tier\":\"") + kernels::sdp_backend_name(backend) + "\"";
      for (bool causal : {false, true}) {
        const std::string suffix = causal ? "_causal" : "";
        try {
          const double fwd = median_ms([&] { forward(causal); }, 2, 10);
          bench::print({("sdpa_fwd" + suffix).c_str(), "loom", L, "bfloat16", 0,
                        forward_flops / (causal ? 2 : 1) / fwd / 1e9, "TFLOP/s", 0, tier.c_str()});
          const double both = median_ms([&] { forward_backward(causal); }, 2, 10);
          bench::print({("sdpa_fwdbwd" + suffix).c_str(), "loom", L, "bfloat16", 0,
                        3.5 * forward_flops / (causal ? 2 : 1) / both / 1e9, "TFLOP/s", 0, tier.c_str()});
        } catch (const Error& e) {  // a tier that does not take the call (or the memory it needs)
          std::fprintf(stderr, "bench_cuda: sdpa%s on %s: %s\n", suffix.c_str(), kernels::sdp_backend_name(backend),
                       e.what());
        }
      }
    }
  }

  // The caching allocator's fast path: a block of this size is cached after the first pair.
  Allocator* allocator = get_allocator(DeviceType::CUDA);
  const int pairs = 100000;
  const double s = bench::median_seconds([&] {
    for (int i = 0; i < pairs; ++i) DataPtr p = allocator->allocate(1 << 20, kCUDA);
  }, 1, 5);
  line("alloc_free_pair", 1 << 20, "bytes", s / pairs * 1e9, "ns");

  throughput_lines(copy_gbs);
}
