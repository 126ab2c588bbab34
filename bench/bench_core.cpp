// Core micro-benchmarks, one JSON object per line (bench_util.h):
//   gemm               float32 A·B at N = 256, 1024, 2048 in GFLOP/s, beside the ceiling of
//                      shared/workloads.md (Eigen with AVX-512 on 2 threads, 200 GFLOP/s).
//   add                a + b on 2^24 contiguous float32 elements: GB/s (3 × the bytes of one).
//   softmax            softmax over rows of 4096 float32: GB/s (2 × the input's bytes).
//   sdpa               ms per forward + backward of scaled_dot_product_attention on
//                      (B 8, H 8, L = S = 512, E 64) float32, fused and as the composition
//                      of ops (detail::sdpa_reference) it replaces.
//   tiny_add           ns per a + b on 1- and 16-element tensors, without autograd ...
//   tiny_add_autograd  ... and with inputs requiring grad (each op records a node).
// Every figure is the median of several timed runs after warm-up runs.
//
//   bench_core [--threads N] [--quick]
// torch_bench_core.cpp prints the same gemm and tiny_add lines for LibTorch.
#include "bench/bench_util.h"
#include "loom.h"

using namespace loom;

namespace {

constexpr const char* kFramework = "loom";

void add_lines(const bench::Options& o) {
  const int64_t n = int64_t(1) << 24;
  const Tensor a = randn({n}), b = randn({n});
  const double s = bench::median_seconds([&] { (void)(a + b); }, 2, o.quick ? 3 : 15);
  bench::print({"add", kFramework, n, "float32", get_num_threads(), 3.0 * double(n) * sizeof(float) / s / 1e9,
                "GB/s"});
}

void softmax_lines(const bench::Options& o) {
  const int64_t rows = 2048, cols = 4096;
  const Tensor x = randn({rows, cols});
  const double s = bench::median_seconds([&] { (void)x.softmax(1); }, 2, o.quick ? 3 : 15);
  bench::print({"softmax", kFramework, rows * cols, "float32", get_num_threads(),
                2.0 * double(rows * cols) * sizeof(float) / s / 1e9, "GB/s", 0, ",\"row_length\":4096"});
}

void sdpa_lines(const bench::Options& o) {
  const TensorOptions grad = TensorOptions().requires_grad();
  const Tensor q = randn({8, 8, 512, 64}, grad), k = randn({8, 8, 512, 64}, grad), v = randn({8, 8, 512, 64}, grad);
  const Tensor gy = randn({8, 8, 512, 64});
  for (bool fused : {true, false}) {
    const double s = bench::median_seconds(
        [&] {
          const Tensor out = fused ? nn::functional::scaled_dot_product_attention(q, k, v)
                                   : nn::functional::detail::sdpa_reference(q, k, v, Tensor(), 0.0, false, std::nullopt);
          (out * gy).sum().backward();
        },
        1, o.quick ? 2 : 5);
    bench::print({"sdpa", kFramework, 8 * 8 * 512 * 64, "float32", get_num_threads(), s * 1e3, "ms", 0,
                  fused ? ",\"path\":\"fused\"" : ",\"path\":\"reference\""});
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options o = bench::parse_options(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  manual_seed(0);
  bench::gemm_lines(kFramework, get_num_threads(), o.quick, [](int64_t n) {
    return [a = randn({n, n}), b = randn({n, n})] { (void)matmul(a, b); };
  });
  add_lines(o);
  softmax_lines(o);
  sdpa_lines(o);
  bench::tiny_add_lines(kFramework, get_num_threads(), o.quick, [](int64_t n, bool requires_grad) {
    const TensorOptions opts = TensorOptions().requires_grad(requires_grad);
    return [a = randn({n}, opts), b = randn({n}, opts)] { (void)(a + b); };
  });
  return 0;
}
