// The bfloat16 GEMM (kernels/cpu/gemm_bf16.h, Note [bfloat16 GEMM]) against a float64 loop
// over the operands rounded to bfloat16, for each kernel: the float32 one runs everywhere;
// the avx512_bf16 one is tagged "[.avx512bf16]" and registered on its own, skipped (exit
// 77) on a CPU without AVX512-BF16, never counted as passed there; the onednn one likewise
// "[.onednn_bf16]", skipped where oneDNN makes no bfloat16 primitive (no AVX-512).
#include <array>
#include <cstdlib>

#include "test_util.h"
#include "bf16_kernel_test_util.h"
#include "kernels/kernels.h"
#include "kernels/cpu/gemm_bf16.h"

using namespace loom;
using namespace loom::test;
using kernels::cpu::Bf16GemmKernel;

namespace {

// out (M, N) = a (M, K) · b (K, N) in float64 over the bfloat16-rounded values of a and b.
std::vector<double> reference(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = values(a.to(kBFloat16).contiguous()), bv = values(b.to(kBFloat16).contiguous());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> out(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) out[size_t(m * N + n)] += av[size_t(m * K + k)] * bv[size_t(k * N + n)];
  return out;
}

// |C - reference| <= the float32 sum's rounding (K · 2^-23 · Σ|a b|, bounded loosely).
void check_float32_sums(const std::vector<float>& c, const Tensor& a, const Tensor& b, const std::vector<double>& ref) {
  const std::vector<double> mag = reference(a.abs(), b.abs());
  const double K = double(a.size(1));
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("element " << i << ": " << c[i] << " vs " << ref[i]);
    REQUIRE(std::abs(double(c[i]) - ref[i]) <= (K + 8) * 1.2e-7 * mag[i] + 1e-30);
  }
}

// The kernel's C = A · B for float32 and bfloat16 operands, row- and column-major, at odd
// sizes (tails of the 12-row and 32-column tiles, an odd K, K past one 1024-wide block, M
// past one 192-row block of packed A).
void check_gemm_sizes(Bf16GemmKernel kernel) {
  const ForcedBf16Kernel forced(kernel);
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {7, 3, 1}, {13, 33, 5}, {37, 45, 29},
                                                     {12, 32, 64}, {50, 70, 1031}, {130, 97, 2},
                                                     {201, 40, 1101}};
  for (const auto& [M, N, K] : sizes) {
    for (DType dtype : {kFloat32, kBFloat16}) {
      for (bool a_col : {false, true}) {
        for (bool b_col : {false, true}) {
          INFO("M " << M << " N " << N << " K " << K << " " << dtype_name(dtype) << " a_col " << a_col << " b_col "
                    << b_col);
          const Tensor a = random_nonzero({M, K}), b = random_nonzero({K, N});
          // The operand's storage: a column-major matrix is the transpose of a row-major one.
          const Tensor as = (a_col ? a.t().contiguous() : a).to(dtype), bs = (b_col ? b.t().contiguous() : b).to(dtype);
          using kernels::cpu::MatrixRef;
          const kernels::cpu::Bf16Operand ao{MatrixRef{as.data(), a_col ? M : K, a_col}, dtype};
          const kernels::cpu::Bf16Operand bo{MatrixRef{bs.data(), b_col ? K : N, b_col}, dtype};
          kernels::cpu::PackedBf16B packed;
          kernels::cpu::pack_bf16_b(bo, K, N, packed);
          REQUIRE(packed.kernel == kernel);
          std::vector<float> c(size_t(M * N), 123.0f);
          kernels::cpu::gemm_bf16(M, ao, packed, c.data(), N, false);
          const std::vector<double> ref = reference(a.to(dtype), b.to(dtype));
          check_float32_sums(c, a.to(dtype), b.to(dtype), ref);
          // accumulate: C += A · B.
          kernels::cpu::gemm_bf16(M, ao, packed, c.data(), N, true);
          std::vector<float> half(c.size());
          for (size_t i = 0; i < c.size(); ++i) half[i] = c[i] / 2;
          check_float32_sums(half, a.to(dtype), b.to(dtype), ref);
        }
      }
    }
  }
}

// matmul of bfloat16 tensors through kernels::bmm: strided views, a batch, beta = 1.
void check_bmm(Bf16GemmKernel kernel) {
  const ForcedBf16Kernel forced(kernel);
  const Tensor a = random_nonzero({3, 40, 19}, kBFloat16), b = random_nonzero({3, 33, 19}, kBFloat16);
  const Tensor c = matmul(a, b.transpose(1, 2));  // (3, 40, 33), B column-major
  REQUIRE(c.dtype() == kBFloat16);
  for (int64_t i = 0; i < 3; ++i) {
    INFO("batch item " << i);
    check_close(c.select(0, i).contiguous(), reference(a.select(0, i), b.select(0, i).t()), kBFloat16);
  }
  // Large enough to split C's rows across the threads.
  const Tensor x = random_nonzero({300, 200}, kBFloat16), w = random_nonzero({200, 150}, kBFloat16);
  check_close(matmul(x, w), reference(x, w), kBFloat16, "threads");
  // beta = 1 into a strided (transposed) output.
  Tensor out = random_nonzero({150, 300}, kBFloat16).t();  // (300, 150), column-major
  const std::vector<double> before = values(out.contiguous());
  kernels::bmm(out.unsqueeze(0), x.unsqueeze(0), w.unsqueeze(0), 1);
  std::vector<double> expected = reference(x, w);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += before[i];
  check_close(out.contiguous(), expected, kBFloat16, "beta 1");
}

}  // namespace

TEST_CASE("bfloat16 GEMM, float32 kernel: odd sizes, both storage orders, float32 and bfloat16 operands",
          "[gemm_bf16]") {
  check_gemm_sizes(Bf16GemmKernel::Float32);
}

TEST_CASE("bfloat16 matmul, float32 kernel: batches, strided operands and output, beta 1", "[gemm_bf16]") {
  check_bmm(Bf16GemmKernel::Float32);
}

TEST_CASE("bfloat16 GEMM, avx512_bf16 kernel: odd sizes, both storage orders, float32 and bfloat16 operands",
          "[.avx512bf16]") {
  skip_without_avx512_bf16();
  check_gemm_sizes(Bf16GemmKernel::Avx512Bf16);
}

TEST_CASE("bfloat16 matmul, avx512_bf16 kernel: batches, strided operands and output, beta 1", "[.avx512bf16]") {
  skip_without_avx512_bf16();
  check_bmm(Bf16GemmKernel::Avx512Bf16);
}

TEST_CASE("bfloat16 GEMM, onednn kernel: odd sizes, both storage orders, float32 and bfloat16 operands",
          "[.onednn_bf16]") {
  skip_without_onednn_bf16();
  check_gemm_sizes(Bf16GemmKernel::OneDnn);
}

TEST_CASE("bfloat16 matmul, onednn kernel: batches, strided operands and output, beta 1", "[.onednn_bf16]") {
  skip_without_onednn_bf16();
  check_bmm(Bf16GemmKernel::OneDnn);
}

TEST_CASE("bfloat16 GEMM: the kernel in use is the CPU's best, and one it lacks cannot be forced", "[gemm_bf16]") {
  const bool has = kernels::cpu::cpu_has_avx512_bf16();
  const bool onednn = kernels::cpu::onednn_matmul_available(kBFloat16);
  // onednn only with AMX (and a oneDNN that makes the primitive), else as before AMX.
  const Bf16GemmKernel best = kernels::cpu::cpu_has_amx_bf16() && onednn ? Bf16GemmKernel::OneDnn
                              : has                                      ? Bf16GemmKernel::Avx512Bf16
                                                                         : Bf16GemmKernel::Float32;
  REQUIRE(kernels::cpu::default_bf16_gemm_kernel() == best);
  if (std::getenv("LOOM_CPU_BF16_GEMM") == nullptr) REQUIRE(kernels::cpu::bf16_gemm_kernel() == best);
  if (!has) {
    REQUIRE_THROWS_AS(kernels::cpu::force_bf16_gemm_kernel(Bf16GemmKernel::Avx512Bf16), ValueError);
    REQUIRE(kernels::cpu::bf16_gemm_kernel() != Bf16GemmKernel::Avx512Bf16);
  }
  if (!onednn) {
    REQUIRE_THROWS_AS(kernels::cpu::force_bf16_gemm_kernel(Bf16GemmKernel::OneDnn), ValueError);
    REQUIRE(kernels::cpu::bf16_gemm_kernel() != Bf16GemmKernel::OneDnn);
  }
  kernels::cpu::force_bf16_gemm_kernel(Bf16GemmKernel::Float32);
  REQUIRE(kernels::cpu::bf16_gemm_kernel() == Bf16GemmKernel::Float32);
  kernels::cpu::force_bf16_gemm_kernel(std::nullopt);
  if (std::getenv("LOOM_CPU_BF16_GEMM") == nullptr) REQUIRE(kernels::cpu::bf16_gemm_kernel() == best);
}
