// oneDNN's matmul primitive with packed weights and a primitive cache (kernels/cpu/
// onednn_matmul.h, Note [oneDNN matmul primitive]) against a float64 loop. The float32
// instantiation runs on any x86-64 ("[gemm][onednn]"); the bfloat16 one needs a CPU where
// oneDNN 2.6 makes a bfloat16 primitive (AVX-512): tagged "[.onednn_bf16]", registered on its
// own and skipped (exit 77) elsewhere, never counted as passed.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "test_util.h"
#include "bf16_kernel_test_util.h"
#include "thrown_message.h"
#include "kernels/cpu/gemm_env.h"
#include "kernels/cpu/gemm_report.h"
#include "kernels/cpu/onednn_matmul.h"

using namespace loom;
using namespace loom::test;
namespace kcpu = loom::kernels::cpu;

namespace {

// A random non-zero (rows, cols) matrix in `dtype` (float32 or bfloat16), stored row- or
// column-major with ld = the inner extent + pad, the padding NaN (read, it would show).
struct Stored {
  std::vector<double> values;   // (rows, cols) row-major: what the kernel multiplies
  std::vector<float> f32;       // the storage, float32
  std::vector<uint16_t> bf16;   // or bfloat16 bits
  kcpu::MatrixRef ref;
  DType dtype;
};

Stored stored(int64_t rows, int64_t cols, DType dtype, bool col_major, int64_t pad) {
  const Tensor t = random_nonzero({rows, cols}, dtype);
  Stored s;
  s.dtype = dtype;
  s.values = values(t);
  const int64_t inner = col_major ? rows : cols, outer = col_major ? cols : rows, ld = inner + pad;
  const Tensor dense = (col_major ? t.t() : t).contiguous();  // (outer, inner)
  auto lay_out = [&](auto& into, const auto* from, auto nan) {
    into.assign(size_t(outer * ld), nan);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) into[size_t(o * ld + i)] = from[o * inner + i];
  };
  if (dtype == kFloat32) {
    lay_out(s.f32, static_cast<const float*>(dense.data()), std::numeric_limits<float>::quiet_NaN());
    s.ref = kcpu::MatrixRef{s.f32.data(), ld, col_major};
  } else {
    lay_out(s.bf16, static_cast<const uint16_t*>(dense.data()), uint16_t(0x7fc0));
    s.ref = kcpu::MatrixRef{s.bf16.data(), ld, col_major};
  }
  return s;
}

// values (float32 ones) rounded to bfloat16, to nearest even, as the kernel rounds a
// float32 operand: the nearest multiple of the value's bfloat16 spacing, ties to even.
std::vector<double> rounded_to_bf16(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    int e = 0;
    std::frexp(v[i], &e);                        // |v| in [2^(e-1), 2^e)
    const double spacing = std::ldexp(1.0, e - 8);  // bfloat16: 8 significant bits
    out[i] = std::nearbyint(v[i] / spacing) * spacing;  // the default rounding: to nearest even
  }
  return out;
}

struct Case {
  int64_t M, K, N;
  bool a_col = false;
  int64_t a_pad = 0, b_pad = 0, ldc_pad = 0;
  bool b_col = false;
  bool accumulate = false;
};

// Runs one case of a `type` product (A of a_dtype, B of b_dtype) and checks C against the
// float64 loop: |C - ref| <= (K + 8) · 2^-23 · Σ|a b| (+ |C0| · 2^-23 when accumulating).
// The operands' values are the rounded ones, so their products are exact in float32 (for
// bfloat16: 8 + 8 significant bits) and only the float32 sums round. Returns C.
std::vector<float> check_case(DType type, DType a_dtype, DType b_dtype, const Case& c) {
  INFO("M " << c.M << " K " << c.K << " N " << c.N << " a_col " << c.a_col << " a_pad " << c.a_pad << " b_col "
            << c.b_col << " b_pad " << c.b_pad << " ldc_pad " << c.ldc_pad << " accumulate " << c.accumulate
            << " A " << dtype_name(a_dtype) << " B " << dtype_name(b_dtype));
  const Stored a = stored(c.M, c.K, a_dtype, c.a_col, c.a_pad), b = stored(c.K, c.N, b_dtype, c.b_col, c.b_pad);
  const bool round = type == kBFloat16;
  const std::vector<double> av = round ? rounded_to_bf16(a.values) : a.values;
  const std::vector<double> bv = round ? rounded_to_bf16(b.values) : b.values;
  kcpu::OneDnnPackedWeights w;
  kcpu::onednn_pack_weights(b.ref, b_dtype, c.K, c.N, type, w);
  const int64_t ldc = c.N + c.ldc_pad;
  const Tensor c0 = random_nonzero({c.M, ldc});
  std::vector<float> out = c0.to_vector<float>();
  const std::vector<float> before = out;
  kcpu::onednn_matmul(c.M, a.ref, a_dtype, w, out.data(), ldc, c.accumulate);
  for (int64_t m = 0; m < c.M; ++m) {
    for (int64_t n = 0; n < c.N; ++n) {
      double ref = c.accumulate ? double(before[size_t(m * ldc + n)]) : 0.0, mag = std::abs(ref);
      for (int64_t k = 0; k < c.K; ++k) {
        const double p = av[size_t(m * c.K + k)] * bv[size_t(k * c.N + n)];
        ref += p;
        mag += std::abs(p);
      }
      const double got = out[size_t(m * ldc + n)];
      INFO("C[" << m << ", " << n << "] = " << got << ", reference " << ref);
      REQUIRE(std::abs(got - ref) <= double(c.K + 8) * 0x1p-23 * mag);
    }
    for (int64_t n = c.N; n < ldc; ++n) REQUIRE(out[size_t(m * ldc + n)] == before[size_t(m * ldc + n)]);
  }
  return out;
}

// Sizes 1, 7, 33, 257 in every combination, row-major and contiguous then column-major,
// strided, accumulating into a C with ldc > N; and a 1,000-sized dimension each way.
void check_sizes(DType type, DType a_dtype, DType b_dtype) {
  const std::array<int64_t, 4> sizes = {1, 7, 33, 257};
  for (int64_t M : sizes)
    for (int64_t K : sizes)
      for (int64_t N : sizes) {
        check_case(type, a_dtype, b_dtype, Case{M, K, N});
        check_case(type, a_dtype, b_dtype, Case{M, K, N, true, 5, 3, 9, true, true});
      }
  for (const auto& [M, K, N] : std::vector<std::array<int64_t, 3>>{{1000, 33, 7}, {7, 1000, 33}, {33, 7, 1000}}) {
    check_case(type, a_dtype, b_dtype, Case{M, K, N});
    check_case(type, a_dtype, b_dtype, Case{M, K, N, true, 3, 0, 2, false, true});
  }
}

// The cache: an equal key makes nothing and gives the same bits; a different A stride,
// A order, ldc, accumulate, M or type makes a new primitive.
void check_cache(DType type) {
  const int64_t M = 37, K = 45, N = 29;
  kcpu::clear_onednn_matmul_cache();
  const Stored a = stored(M, K, type, false, 0), a_col = stored(M, K, type, true, 0), a_pad = stored(M, K, type, false, 4);
  const Stored b = stored(K, N, type, false, 0);
  kcpu::OneDnnPackedWeights w;
  const auto created = [] { return kcpu::onednn_matmul_cache_stats().created; };
  const int64_t c0 = created();
  kcpu::onednn_pack_weights(b.ref, type, K, N, type, w);
  REQUIRE(created() == c0 + 1);  // the packing reorder
  kcpu::onednn_pack_weights(b.ref, type, K, N, type, w);
  REQUIRE(created() == c0 + 1);
  auto run = [&](const Stored& x, int64_t m, int64_t ldc, bool acc) {
    std::vector<float> out(size_t(m * ldc), 0.5f);
    kcpu::onednn_matmul(m, x.ref, type, w, out.data(), ldc, acc);
    return out;
  };
  const std::vector<float> first = run(a, M, N, false);
  REQUIRE(created() == c0 + 2);
  const int64_t hits = kcpu::onednn_matmul_cache_stats().hits;
  const std::vector<float> again = run(a, M, N, false);
  REQUIRE(created() == c0 + 2);
  REQUIRE(kcpu::onednn_matmul_cache_stats().hits == hits + 1);
  REQUIRE(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
  // Equal shapes, other strides or order, ldc, accumulate, M: each its own primitive.
  run(a_col, M, N, false);  // (its values: checked by the size tests)
  REQUIRE(created() == c0 + 3);
  run(a_pad, M, N, false);
  REQUIRE(created() == c0 + 4);
  run(a, M, N + 3, false);
  REQUIRE(created() == c0 + 5);
  run(a, M, N, true);
  REQUIRE(created() == c0 + 6);
  run(a, M - 1, N, false);
  REQUIRE(created() == c0 + 7);
  REQUIRE(kcpu::onednn_matmul_cache_stats().entries == 7);
  REQUIRE(kcpu::onednn_matmul_cache_stats().weight_reorders == 0);
}

}  // namespace

TEST_CASE("oneDNN matmul primitive, float32: sizes 1 to 1000, both orders of A, strides, ldc, accumulate",
          "[gemm][onednn]") {
  check_sizes(kFloat32, kFloat32, kFloat32);
  // B column-major, padded (the packing reorder's strides).
  check_case(kFloat32, kFloat32, kFloat32, Case{33, 257, 7, false, 0, 11, 0, true, false});
}

TEST_CASE("oneDNN matmul primitive, float32: the cache reuses equal keys, bit for bit, and keeps others apart",
          "[gemm][onednn]") {
  check_cache(kFloat32);
}

TEST_CASE("oneDNN matmul primitive: the cache is bounded, least recently used out first", "[gemm][onednn]") {
  kcpu::clear_onednn_matmul_cache();
  const Stored b = stored(3, 2, kFloat32, false, 0);
  kcpu::OneDnnPackedWeights w;
  kcpu::onednn_pack_weights(b.ref, kFloat32, 3, 2, kFloat32, w);
  const int64_t n = int64_t(kcpu::kOneDnnMatmulCacheCapacity) + 8;
  const Stored a = stored(n, 3, kFloat32, false, 0);
  std::vector<float> out(size_t(n * 2));
  for (int64_t m = 1; m <= n; ++m) kcpu::onednn_matmul(m, a.ref, kFloat32, w, out.data(), 2, false);
  const auto s = kcpu::onednn_matmul_cache_stats();
  REQUIRE(s.entries == int64_t(kcpu::kOneDnnMatmulCacheCapacity) + 1);  // full of matmuls, and the packing
  const int64_t created = s.created;
  kcpu::onednn_matmul(n, a.ref, kFloat32, w, out.data(), 2, false);  // the most recent: kept
  REQUIRE(kcpu::onednn_matmul_cache_stats().created == created);
  kcpu::onednn_matmul(1, a.ref, kFloat32, w, out.data(), 2, false);  // the oldest: evicted
  REQUIRE(kcpu::onednn_matmul_cache_stats().created == created + 1);
}

TEST_CASE("oneDNN matmul primitive, float32: threads sharing one cached primitive get the same bits",
          "[gemm][onednn]") {
  const int64_t M = 64, K = 96, N = 80;
  const Stored a = stored(M, K, kFloat32, false, 0), b = stored(K, N, kFloat32, true, 0);
  kcpu::OneDnnPackedWeights w;
  kcpu::onednn_pack_weights(b.ref, kFloat32, K, N, kFloat32, w);
  std::vector<float> expected(size_t(M * N));
  kcpu::onednn_matmul(M, a.ref, kFloat32, w, expected.data(), N, false);
  std::vector<std::vector<float>> got(4, std::vector<float>(size_t(M * N)));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) kcpu::onednn_matmul(M, a.ref, kFloat32, w, got[t].data(), N, false);
    });
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) REQUIRE(std::memcmp(g.data(), expected.data(), g.size() * sizeof(float)) == 0);
}

TEST_CASE("oneDNN matmul primitive: mismatched types and shapes are loom errors", "[gemm][onednn]") {
  const Stored b = stored(4, 5, kFloat32, false, 0), a = stored(3, 4, kFloat32, false, 0);
  kcpu::OneDnnPackedWeights w;
  REQUIRE_THROWS_AS(kcpu::onednn_pack_weights(b.ref, kFloat32, 4, 5, kFloat64, w), DTypeError);
  REQUIRE_THROWS_AS(kcpu::onednn_pack_weights(kcpu::MatrixRef{b.f32.data(), 3, false}, kFloat32, 4, 5, kFloat32, w),
                    ValueError);
  kcpu::onednn_pack_weights(b.ref, kFloat32, 4, 5, kFloat32, w);
  std::vector<float> out(15);
  REQUIRE_THROWS_AS(kcpu::onednn_matmul(3, a.ref, kFloat32, w, out.data(), 4, false), ValueError);  // ldc < N
  const Tensor a16 = random_nonzero({3, 4}, kBFloat16);
  REQUIRE_THROWS_AS(kcpu::onednn_matmul(3, kcpu::MatrixRef{a16.data(), 4, false}, kBFloat16, w, out.data(), 5, false),
                    DTypeError);
  const std::string message = thrown_message<DTypeError>([&] {
    kcpu::onednn_matmul(3, kcpu::MatrixRef{a16.data(), 4, false}, kBFloat16, w, out.data(), 5, false);
  });
  REQUIRE_THAT(message, Catch::Contains("onednn_matmul") && Catch::Contains("(3, 4)"));
}

TEST_CASE("oneDNN matmul primitive, bfloat16: sizes, orders, strides, float32 and bfloat16 operands",
          "[.onednn_bf16]") {
  skip_without_onednn_bf16();
  check_sizes(kBFloat16, kBFloat16, kBFloat16);
  check_sizes(kBFloat16, kFloat32, kFloat32);  // both rounded by Loom, to nearest even
  check_case(kBFloat16, kFloat32, kBFloat16, Case{33, 257, 7, true, 2, 11, 0, true, true});
}

TEST_CASE("oneDNN matmul primitive, bfloat16: the cache, and float32 and bfloat16 primitives kept apart",
          "[.onednn_bf16]") {
  skip_without_onednn_bf16();
  check_cache(kBFloat16);
  // Equal shapes and strides, other type: a new primitive each.
  const int64_t M = 9, K = 16, N = 8;
  const Stored a32 = stored(M, K, kFloat32, false, 0), b32 = stored(K, N, kFloat32, false, 0);
  kcpu::OneDnnPackedWeights w32, w16;
  kcpu::onednn_pack_weights(b32.ref, kFloat32, K, N, kFloat32, w32);
  kcpu::onednn_pack_weights(b32.ref, kFloat32, K, N, kBFloat16, w16);
  std::vector<float> out(size_t(M * N));
  kcpu::onednn_matmul(M, a32.ref, kFloat32, w32, out.data(), N, false);
  const int64_t created = kcpu::onednn_matmul_cache_stats().created;
  kcpu::onednn_matmul(M, a32.ref, kFloat32, w16, out.data(), N, false);
  REQUIRE(kcpu::onednn_matmul_cache_stats().created == created + 1);
  REQUIRE(kcpu::onednn_matmul_cache_stats().weight_reorders == 0);
}

TEST_CASE("CPU GEMM environment switches: parsed values, and clear errors for others", "[gemm][onednn]") {
  using kcpu::Bf16GemmKernel;
  using kcpu::FloatGemm;
  REQUIRE_FALSE(kcpu::parse_bf16_gemm_env(nullptr).has_value());
  REQUIRE_FALSE(kcpu::parse_bf16_gemm_env("").has_value());
  REQUIRE(kcpu::parse_bf16_gemm_env("onednn") == Bf16GemmKernel::OneDnn);
  REQUIRE(kcpu::parse_bf16_gemm_env("avx512_bf16") == Bf16GemmKernel::Avx512Bf16);
  REQUIRE(kcpu::parse_bf16_gemm_env("float32") == Bf16GemmKernel::Float32);
  REQUIRE_THROWS_AS(kcpu::parse_bf16_gemm_env("amx"), ValueError);
  REQUIRE_THROWS_AS(kcpu::parse_bf16_gemm_env("OneDNN"), ValueError);
  REQUIRE_THAT(thrown_message<ValueError>([] { kcpu::parse_bf16_gemm_env("amx"); }),
               Catch::Contains("LOOM_CPU_BF16_GEMM=amx") && Catch::Contains("onednn, avx512_bf16 and float32"));
  REQUIRE_FALSE(kcpu::parse_float_gemm_env(nullptr).has_value());
  REQUIRE(kcpu::parse_float_gemm_env("onednn") == FloatGemm::OneDnn);
  REQUIRE(kcpu::parse_float_gemm_env("eigen") == FloatGemm::Eigen);
  REQUIRE_THAT(thrown_message<ValueError>([] { kcpu::parse_float_gemm_env("mkl"); }),
               Catch::Contains("LOOM_CPU_FLOAT_GEMM=mkl") && Catch::Contains("onednn and eigen"));
}

TEST_CASE("CPU GEMM report: the features and the kernels chosen per dtype", "[gemm][onednn]") {
  using kcpu::Bf16GemmKernel;
  const std::string report = kcpu::cpu_gemm_report();
  INFO(report);
  for (const char* feature : {"avx2 ", "avx512f ", "avx512_bf16 ", "avx512_fp16 ", "amx_bf16 ", "amx_tile "})
    REQUIRE_THAT(report, Catch::Contains(feature));
  REQUIRE_THAT(report, Catch::Contains(std::string("bfloat16 GEMM: ") +
                                       kcpu::bf16_gemm_kernel_name(kcpu::bf16_gemm_kernel()) + " ("));
  REQUIRE_THAT(report, Catch::Contains(std::string("float32 GEMM: ") + kcpu::float_gemm_name(kcpu::float_gemm()) + " ("));
  // Forced choices show.
  kcpu::force_float_gemm(kcpu::FloatGemm::Eigen);
  const ForcedBf16Kernel forced(Bf16GemmKernel::Float32);
  const std::string forced_report = kcpu::cpu_gemm_report();
  kcpu::force_float_gemm(std::nullopt);
  REQUIRE_THAT(forced_report, Catch::Contains("float32 GEMM: eigen (") && Catch::Contains("bfloat16 GEMM: float32 ("));
  if (!kcpu::onednn_matmul_available(kBFloat16))
    REQUIRE_THAT(report, Catch::Contains("oneDNN bfloat16 matmul: unavailable"));
  // The kernels a user may force, each only where it runs (float32 runs everywhere).
  std::string runs = "bfloat16 GEMM kernels this CPU runs:";
  for (Bf16GemmKernel k : {Bf16GemmKernel::OneDnn, Bf16GemmKernel::Avx512Bf16, Bf16GemmKernel::Float32})
    if (kcpu::bf16_gemm_kernel_available(k)) runs += std::string(" ") + kcpu::bf16_gemm_kernel_name(k);
  REQUIRE_THAT(report, Catch::Contains(runs + "\noneDNN bfloat16 matmul: "));
  REQUIRE_THAT(runs, Catch::EndsWith(" float32"));
}
