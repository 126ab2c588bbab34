// The bfloat16 GEMM's dispatch and its float32 kernel (Note [bfloat16 GEMM], gemm_bf16.h).
#include "kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/gemm_bf16_operand.h"

namespace loom::kernels::cpu {

const char* bf16_gemm_kernel_name(Bf16GemmKernel k) {
  return k == Bf16GemmKernel::Avx512Bf16 ? "avx512_bf16" : "float32";
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

namespace {

constexpr int kNotForced = -1;
std::atomic<int> forced_kernel{kNotForced};

}  // namespace

Bf16GemmKernel bf16_gemm_kernel() {
  const int forced = forced_kernel.load(std::memory_order_relaxed);
  if (forced != kNotForced) return Bf16GemmKernel(forced);
  return cpu_has_avx512_bf16() ? Bf16GemmKernel::Avx512Bf16 : Bf16GemmKernel::Float32;
}

void force_bf16_gemm_kernel(std::optional<Bf16GemmKernel> k) {
  LOOM_CHECK(!k || *k != Bf16GemmKernel::Avx512Bf16 || cpu_has_avx512_bf16(), ValueError,
             "force_bf16_gemm_kernel: this CPU has no AVX512-BF16, so the avx512_bf16 kernel cannot run");
  forced_kernel.store(k ? int(*k) : kNotForced, std::memory_order_relaxed);
}

void pack_bf16_b(const Bf16Operand& b, int64_t K, int64_t N, PackedBf16B& p) {
  p.K = K;
  p.N = N;
  p.kernel = bf16_gemm_kernel();
  if (p.kernel == Bf16GemmKernel::Avx512Bf16) {
    p.pairs.resize(size_t((K + 1) / 2 * ((N + 31) / 32) * 32));
    pack_bf16_pairs_avx512bf16(b, K, N, p.pairs.data());
  } else {
    p.widened.resize(size_t(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) p.widened[size_t(k * N + n)] = bf16_to_float(operand_bits(b, k, n));
  }
}

void gemm_bf16(int64_t M, const Bf16Operand& a, const PackedBf16B& b, float* c, int64_t ldc, bool accumulate) {
  if (M == 0 || b.N == 0) return;
  if (b.K == 0) {  // an empty sum
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(c + m * ldc, c + m * ldc + b.N, 0.0f);
    return;
  }
  if (b.kernel == Bf16GemmKernel::Avx512Bf16) {
    gemm_bf16_avx512bf16(M, a, b.pairs.data(), b.K, b.N, c, ldc, accumulate);
    return;
  }
  // float32: A rounded to bfloat16 and widened, then the float32 GEMM.
  thread_local std::vector<float> widened_a;
  widened_a.resize(size_t(M * b.K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < b.K; ++k) widened_a[size_t(m * b.K + k)] = bf16_to_float(operand_bits(a, m, k));
  GemmArgs g;
  g.M = M;
  g.N = b.N;
  g.K = b.K;
  g.a = MatrixRef{widened_a.data(), b.K, false};
  g.b = MatrixRef{b.widened.data(), b.N, false};
  g.c = c;
  g.ldc = ldc;
  g.beta = accumulate ? 1 : 0;
  g.dtype = DType::Float32;
  best_float_gemm()(g);
}

}  // namespace loom::kernels::cpu
