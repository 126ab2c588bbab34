// Core micro-benchmarks, one JSON object per line (bench_util.h):
//   ceiling            the float32 FMA peak of this CPU on the benchmark's threads at once,
//                      measured first (fma_peak.h): GFLOP/s, the ISA ("avx512f" or
//                      "avx2+fma") and bf16_ceiling, the bfloat16 lines' ceiling (below).
//   gemm               float32 A·B at N = 256, 1024, 2048 in GFLOP/s. This and the next two
//                      print "ceiling" and "fraction_of_ceiling" (value / ceiling) against the
//                      peak just measured, not a constant: it is 200-400 GFLOP/s on 2 cores
//                      depending on the machine of the day.
//   gemm_shape         float32 products of a transformer-small step (d 256, ff 1024, 4096
//                      tokens: forward X·W^T, input gradient dY·W, weight gradient dY^T·X)
//                      and 1024³, in GFLOP/s, once on oneDNN's sgemm (the default) and once
//                      on Eigen's ("kernel"; Note [GEMM dispatch]).
//   gemm_product       float32 A·B through matmul, on the float32 GEMM in use ("kernel"), over
//                      the products below, in GFLOP/s.
//   gemm_bf16          bfloat16 A·B (float32 sums) through matmul, packing of B included, once
//                      per kernel this CPU runs (Note [bfloat16 GEMM]; "kernel" in the line),
//                      over "product"s: squares 256³, 1024³, 2048³ and the GEMMs of the
//                      workloads' steps (LSTM steps and input projections, transformer-small's
//                      token-wise products), with M, K and N. The ceiling is what this CPU
//                      could do for bfloat16, whichever kernel runs: the float32 FMA peak; 2x
//                      that with AVX512-BF16 (vdpbf16ps does two multiply-adds a 32-bit lane
//                      for an FMA's one: assumed, not measured); null with AMX (its tile peak
//                      is unknown here, not measured).
//   gemm_direct        the same products on oneDNN's matmul primitive called directly
//                      (framework "onednn", bench/onednn_direct.h), float32 and, where oneDNN
//                      makes the primitive, bfloat16: kernel "direct_plain" (B row-major) and
//                      "direct_packed" (B reordered once beforehand), on oneDNN's OpenMP team,
//                      "impl" oneDNN's pick. The practical ceiling of Loom's GEMMs (issue 34's
//                      goal: gemm_bf16 >= 0.9x of it); scripts/cpu-check.sh prints the ratios.
//   add                a + b on 2^24 contiguous float32 elements: GB/s (3 × the bytes of one).
//   softmax            softmax over rows of 4096 float32: GB/s (2 × the input's bytes).
//   sdpa               ms per forward + backward of scaled_dot_product_attention on
//                      (B 8, H 8, L = S = 512 and 4096, E 64) float32, fused and as the
//                      composition of ops (detail::sdpa_reference) it replaces, with GFLOP/s
//                      against the 1024³ GEMM rate measured in the same run, and the peak
//                      growth of live tensor memory during one call; the reference is run
//                      only where its (L, S) matrices fit in half the memory available.
//   sdpa (bfloat16)    the same step at L = 512 on bfloat16 q, k, v (Note [16-bit attention on
//                      the CPU]): path "bf16_tiles" runs every tile product on the bfloat16
//                      GEMM; path "float32_tiles" widens the operands to float32 first and
//                      runs the float32 kernel (what the op did before 2026-12-04).
//   sdpa (dropout)     the float32 step at L = 512 with dropout_p 0.1: path "fused" draws the
//                      keep bits inside the kernels (Note [attention dropout]), path "reference"
//                      is the composition with loom::dropout; "fused_p0" is the same step
//                      without dropout, for the cost of the draws.
//   tiny_add           ns per a + b on 1- and 16-element tensors, without autograd ...
//   tiny_add_autograd  ... and with inputs requiring grad (each op records a node).
// Every figure is the median of several timed runs after warm-up runs.
//
//   bench_core [--threads N] [--quick]
// torch_bench_core.cpp prints the same gemm and tiny_add lines for LibTorch.
#include <cmath>
#include <cstring>

#include "bench/bench_util.h"
#include "bench/fma_peak.h"
#include "bench/onednn_direct.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/onednn_matmul.h"
#include "loom.h"

using namespace loom;

namespace {

constexpr const char* kFramework = "loom";

// The ceiling of the bfloat16 lines from the float32 FMA peak (the header says why); NaN: unknown.
double bf16_ceiling(double float32_peak) {
  if (kernels::cpu::cpu_has_amx_bf16()) return std::nan("");
  return kernels::cpu::cpu_has_avx512_bf16() ? 2 * float32_peak : float32_peak;
}

// load1 too: on a shared machine the peak the threads get drops with the load (and the GEMMs' with it).
void ceiling_line(const bench::FmaPeak& peak) {
  const double bf16 = bf16_ceiling(peak.gflops);
  char extra[200];
  if (std::isnan(bf16))
    std::snprintf(extra, sizeof extra, ",\"isa\":\"%s\",\"bf16_ceiling\":null,\"bf16_ceiling_is\":\"unknown (AMX), not measured\"", peak.isa);
  else
    std::snprintf(extra, sizeof extra, ",\"isa\":\"%s\",\"bf16_ceiling\":%.4g,\"bf16_ceiling_is\":\"%s\"", peak.isa, bf16,
                  kernels::cpu::cpu_has_avx512_bf16() ? "2x float32 (AVX512-BF16)" : "float32 FMA peak");
  std::snprintf(extra + std::strlen(extra), sizeof extra - std::strlen(extra), ",\"load1\":%.2f", bench::load1());
  bench::print({"ceiling", kFramework, 0, "float32", peak.threads, peak.gflops, "GFLOP/s", 0, extra});
}

// The products of the gemm_bf16 and gemm_direct lines: squares, then the GEMMs of the
// workloads' steps (loom_bench.cpp): an LSTM step's h·W_hh^T and the input projection of all
// steps at once (lstm-sentiment: batch 64, 256 steps, 128 -> 256; lstm-2x512: 64, 100 steps,
// 512 -> 512) and transformer-small's token-wise products (4096 tokens, d 256, ff 1024).
struct Product {
  const char* name;
  int64_t M, K, N;
};
constexpr Product kProducts[] = {
    {"square", 256, 256, 256},          {"square", 1024, 1024, 1024},     {"square", 2048, 2048, 2048},
    {"lstm_step", 64, 256, 1024},       {"lstm_input", 16384, 128, 1024}, {"lstm512_step", 64, 512, 2048},
    {"lstm512_input", 6400, 512, 2048}, {"qkv", 4096, 256, 768},          {"ffn_in", 4096, 256, 1024},
    {"ffn_out", 4096, 1024, 256}};

int product_reps(const bench::Options& o, const Product& p) {
  const double flops = 2.0 * double(p.M) * double(p.K) * double(p.N);
  return o.quick ? 3 : flops < 1e8 ? 50 : flops < 3e9 ? 15 : 7;
}

void print_product(const char* bench_name, const char* framework, const char* dtype, const Product& p, double s,
                   double ceiling, const std::string& fields) {
  char extra[320];
  std::snprintf(extra, sizeof extra, ",\"product\":\"%s\",\"M\":%lld,\"K\":%lld,\"N\":%lld%s", p.name,
                (long long)p.M, (long long)p.K, (long long)p.N, fields.c_str());
  bench::print({bench_name, framework, p.M * p.K * p.N, dtype, get_num_threads(),
                2.0 * double(p.M) * double(p.K) * double(p.N) / s / 1e9, "GFLOP/s", ceiling, extra});
}

// bfloat16 A·B (float32 sums) through loom::matmul, packing of B included, once per kernel
// this CPU runs (Note [bfloat16 GEMM]; "kernel" in the line).
void gemm_bf16_lines(const bench::Options& o, double ceiling) {
  using kernels::cpu::Bf16GemmKernel;
  for (Bf16GemmKernel k : {Bf16GemmKernel::OneDnn, Bf16GemmKernel::Avx512Bf16, Bf16GemmKernel::Float32}) {
    if (!kernels::cpu::bf16_gemm_kernel_available(k)) continue;
    kernels::cpu::force_bf16_gemm_kernel(k);
    for (const Product& p : kProducts) {
      const Tensor a = randn({p.M, p.K}).to(kBFloat16), b = randn({p.K, p.N}).to(kBFloat16);
      const double s = bench::median_seconds([&] { (void)matmul(a, b); }, 2, product_reps(o, p));
      print_product("gemm_bf16", kFramework, "bfloat16", p, s, ceiling,
                    std::string(",\"kernel\":\"") + kernels::cpu::bf16_gemm_kernel_name(k) + "\"");
    }
  }
  kernels::cpu::force_bf16_gemm_kernel(std::nullopt);
}

// oneDNN's matmul primitive called directly on the same products (bench/onednn_direct.h):
// framework "onednn", kernel "direct_plain" (B row-major as given) or "direct_packed" (B
// reordered once beforehand), in float32 and, where oneDNN makes the primitive, bfloat16.
// The ceiling Loom's gemm_bf16 lines (and the float32 GEMM) are measured against.
void gemm_direct_lines(const bench::Options& o, double ceiling, double bf16_ceiling_value) {
  for (const bool bf16 : {false, true}) {
    if (bf16 && !kernels::cpu::onednn_matmul_available(DType::BFloat16)) continue;
    for (const Product& p : kProducts) {
      for (const bool packed : {false, true}) {
        bench::OneDnnDirectMatmul direct(p.M, p.K, p.N, bf16, packed, get_num_threads());
        const double s = bench::median_seconds([&] { direct.run(); }, 2, product_reps(o, p));
        print_product("gemm_direct", "onednn", bf16 ? "bfloat16" : "float32", p, s, bf16 ? bf16_ceiling_value : ceiling,
                      std::string(",\"kernel\":\"") + (packed ? "direct_packed" : "direct_plain") +
                          "\",\"impl\":\"" + direct.impl() + "\"");
      }
    }
  }
}

// float32 A·B through loom::matmul on the same products, on the float32 GEMM in use.
void gemm_float_product_lines(const bench::Options& o, double ceiling) {
  for (const Product& p : kProducts) {
    const Tensor a = randn({p.M, p.K}), b = randn({p.K, p.N});
    const double s = bench::median_seconds([&] { (void)matmul(a, b); }, 2, product_reps(o, p));
    print_product("gemm_product", kFramework, "float32", p, s, ceiling,
                  std::string(",\"kernel\":\"") + kernels::cpu::float_gemm_name(kernels::cpu::float_gemm()) + "\"");
  }
}

void gemm_shape_lines(const bench::Options& o, double ceiling) {
  using kernels::cpu::FloatGemm;
  struct Product {
    const char* name;
    int64_t M, N, K;
    bool a_transposed, b_transposed;
  };
  const Product products[] = {{"x_wT", 4096, 768, 256, false, true},   {"x_wT", 4096, 1024, 256, false, true},
                              {"x_wT", 4096, 256, 1024, false, true},  {"dy_w", 4096, 256, 768, false, false},
                              {"dyT_x", 768, 256, 4096, true, false},  {"dyT_x", 1024, 256, 4096, true, false},
                              {"square", 1024, 1024, 1024, false, false}};
  for (FloatGemm g : {FloatGemm::OneDnn, FloatGemm::Eigen}) {
    kernels::cpu::force_float_gemm(g);
    for (const Product& p : products) {
      const Tensor a = p.a_transposed ? randn({p.K, p.M}).t() : randn({p.M, p.K});
      const Tensor b = p.b_transposed ? randn({p.N, p.K}).t() : randn({p.K, p.N});
      const double s = bench::median_seconds([&] { (void)matmul(a, b); }, 2, o.quick ? 3 : 15);
      char extra[128];
      std::snprintf(extra, sizeof extra, ",\"kernel\":\"%s\",\"product\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld",
                    kernels::cpu::float_gemm_name(g), p.name, (long long)p.M, (long long)p.N, (long long)p.K);
      bench::print({"gemm_shape", kFramework, p.M * p.N * p.K, "float32", get_num_threads(),
                    2.0 * double(p.M) * double(p.N) * double(p.K) / s / 1e9, "GFLOP/s", ceiling, extra});
    }
  }
  kernels::cpu::force_float_gemm(std::nullopt);
}

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

// The float32 GEMM rate (GFLOP/s) of matmul at 1024³ here and now: the sdpa lines' ceiling.
double gemm_gflops_1024(bool quick) {
  const int64_t n = 1024;
  const Tensor a = randn({n, n}), b = randn({n, n});
  const double s = bench::median_seconds([&] { (void)matmul(a, b); }, 2, quick ? 3 : 15);
  return 2.0 * double(n * n * n) / s / 1e9;
}

// MemAvailable of /proc/meminfo in bytes (0 where unknown).
double available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
  std::fclose(f);
  return kb * 1024;
}

// One forward + backward of the fused op or the reference composition; gradients accumulate
// into q, k and v's .grad (allocated by the first call).
void sdpa_step(bool fused, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gy) {
  const Tensor out = fused ? nn::functional::scaled_dot_product_attention(q, k, v)
                           : nn::functional::detail::sdpa_reference(q, k, v, Tensor(), 0.0, false, std::nullopt);
  (out * gy).sum().backward();
}

// Bytes of tensor storage live at the peak of one call beyond those live before it.
size_t sdpa_peak_growth(bool fused, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gy) {
  const size_t before = cpu::memory_allocated();
  cpu::reset_peak_memory_stats();
  sdpa_step(fused, q, k, v, gy);
  return cpu::max_memory_allocated() - before;
}

void sdpa_lines(const bench::Options& o) {
  const int64_t B = 8, H = 8, E = 64, N = B * H;
  const double ceiling = gemm_gflops_1024(o.quick);
  double reference_peak_per_score = 0;  // the reference's peak growth / (N L S) at the last L it ran
  for (const int64_t L : {int64_t(512), int64_t(4096)}) {
    const TensorOptions grad = TensorOptions().requires_grad();
    const Tensor q = randn({B, H, L, E}, grad), k = randn({B, H, L, E}, grad), v = randn({B, H, L, E}, grad);
    const Tensor gy = randn({B, H, L, E});
    // forward 2 GEMMs (q k^T, p v), backward 5 (q k^T again, p^T dout, dout v^T, ds k, ds^T q)
    const double flops = 14.0 * double(N) * double(L) * double(L) * double(E);
    const double scores = double(N) * double(L) * double(L);  // elements of one (N, L, S) matrix
    for (const bool fused : {true, false}) {
      const char* path = fused ? "fused" : "reference";
      char extra[512];
      if (!fused) {
        const double need = reference_peak_per_score * scores, have = available_bytes();
        if (need > 0.5 * have) {  // skipped: more than half of what is free on a shared machine
          std::snprintf(extra, sizeof extra,
                        ",\"path\":\"%s\",\"L\":%lld,\"S\":%lld,\"skipped\":\"needs about %.1f GB (its peak at the "
                        "smaller L, scaled by L*S; one (N, L, S) float matrix is %.1f GB), runs only under half of "
                        "the %.1f GB available\"",
                        path, (long long)L, (long long)L, need / 1e9, scores * 4 / 1e9, have / 1e9);
          std::printf("{\"bench\":\"sdpa\",\"framework\":\"%s\",\"size\":%lld,\"dtype\":\"float32\",\"threads\":%d,"
                      "\"value\":null,\"unit\":\"ms\"%s}\n",
                      kFramework, (long long)(N * L * E), get_num_threads(), extra);
          std::fflush(stdout);
          continue;
        }
      }
      sdpa_step(fused, q, k, v, gy);  // warm-up; allocates the .grad of q, k and v
      const size_t peak = sdpa_peak_growth(fused, q, k, v, gy);
      if (!fused) reference_peak_per_score = double(peak) / scores;
      const int reps = o.quick ? 1 : (L <= 512 ? 5 : 3);
      const double s = bench::median_seconds([&] { sdpa_step(fused, q, k, v, gy); }, 0, reps);
      const double gflops = flops / s / 1e9;
      std::snprintf(extra, sizeof extra,
                    ",\"path\":\"%s\",\"B\":%lld,\"heads\":%lld,\"L\":%lld,\"S\":%lld,\"E\":%lld,\"gflop\":%.2f,"
                    "\"gflop_per_s\":%.1f,\"gemm_1024_gflop_per_s\":%.1f,\"fraction_of_gemm\":%.3f,"
                    "\"peak_mem_bytes\":%zu",
                    path, (long long)B, (long long)H, (long long)L, (long long)L, (long long)E, flops / 1e9, gflops,
                    ceiling, gflops / ceiling, peak);
      bench::print({"sdpa", kFramework, N * L * E, "float32", get_num_threads(), s * 1e3, "ms", 0, extra});
    }
  }
}

void sdpa_bf16_lines(const bench::Options& o) {
  const int64_t B = 8, H = 8, E = 64, L = 512, N = B * H;
  const TensorOptions grad = TensorOptions().dtype(kBFloat16).requires_grad();
  const Tensor q = randn({B, H, L, E}, grad), k = randn({B, H, L, E}, grad), v = randn({B, H, L, E}, grad);
  const Tensor gy = randn({B, H, L, E}).to(kBFloat16);
  const double flops = 14.0 * double(N) * double(L) * double(L) * double(E);
  for (const bool bf16_tiles : {true, false}) {
    auto step = [&] {
      // float32_tiles: the operands widened once, as autograd sees them (gradients flow back in bfloat16)
      auto as = [&](const Tensor& t) { return bf16_tiles ? t : t.to(kFloat32); };
      const Tensor out = nn::functional::scaled_dot_product_attention(as(q), as(k), as(v)).to(kBFloat16);
      (out * gy).sum().backward();
    };
    step();  // warm-up; allocates the .grad of q, k and v
    const double s = bench::median_seconds(step, 0, o.quick ? 1 : 5);
    char extra[256];
    std::snprintf(extra, sizeof extra, ",\"path\":\"%s\",\"B\":%lld,\"heads\":%lld,\"L\":%lld,\"S\":%lld,\"E\":%lld,"
                  "\"gflop_per_s\":%.1f",
                  bf16_tiles ? "bf16_tiles" : "float32_tiles", (long long)B, (long long)H, (long long)L, (long long)L,
                  (long long)E, flops / s / 1e9);
    bench::print({"sdpa", kFramework, N * L * E, "bfloat16", get_num_threads(), s * 1e3, "ms", 0, extra});
  }
}

void sdpa_dropout_lines(const bench::Options& o) {
  const int64_t B = 8, H = 8, E = 64, L = 512;
  const TensorOptions grad = TensorOptions().requires_grad();
  const Tensor q = randn({B, H, L, E}, grad), k = randn({B, H, L, E}, grad), v = randn({B, H, L, E}, grad);
  const Tensor gy = randn({B, H, L, E});
  for (const char* path : {"fused_p0", "fused", "reference"}) {
    const double p = std::string(path) == "fused_p0" ? 0.0 : 0.1;
    auto step = [&] {
      const Tensor out = std::string(path) == "reference"
                             ? nn::functional::detail::sdpa_reference(q, k, v, Tensor(), p, false, std::nullopt)
                             : nn::functional::scaled_dot_product_attention(q, k, v, Tensor(), p);
      (out * gy).sum().backward();
    };
    step();  // warm-up; allocates the .grad of q, k and v
    const double s = bench::median_seconds(step, 0, o.quick ? 1 : 5);
    char extra[160];
    std::snprintf(extra, sizeof extra, ",\"path\":\"%s\",\"dropout_p\":%.1f,\"L\":%lld,\"S\":%lld,\"E\":%lld", path,
                  p, (long long)L, (long long)L, (long long)E);
    bench::print({"sdpa", kFramework, B * H * L * E, "float32", get_num_threads(), s * 1e3, "ms", 0, extra});
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Options o = bench::parse_options(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  manual_seed(0);
  const bench::FmaPeak peak = bench::measure_fma_peak(get_num_threads(), o.quick);
  ceiling_line(peak);
  bench::gemm_lines(kFramework, get_num_threads(), o.quick, peak.gflops, [](int64_t n) {
    return [a = randn({n, n}), b = randn({n, n})] { (void)matmul(a, b); };
  });
  gemm_shape_lines(o, peak.gflops);
  gemm_float_product_lines(o, peak.gflops);
  gemm_bf16_lines(o, bf16_ceiling(peak.gflops));
  gemm_direct_lines(o, peak.gflops, bf16_ceiling(peak.gflops));
  add_lines(o);
  softmax_lines(o);
  sdpa_lines(o);
  sdpa_bf16_lines(o);
  sdpa_dropout_lines(o);
  bench::tiny_add_lines(kFramework, get_num_threads(), o.quick, [](int64_t n, bool requires_grad) {
    const TensorOptions opts = TensorOptions().requires_grad(requires_grad);
    return [a = randn({n}, opts), b = randn({n}, opts)] { (void)(a + b); };
  });
  return 0;
}
