// The bfloat16 GEMM's dispatch and its float32 kernel (Note [bfloat16 GEMM], gemm_bf16.h).
#include "kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <atomic>

#include <cstdlib>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm_bf16_operand.h"
#include "kernels/cpu/gemm_env.h"
#include "kernels/cpu/onednn_matmul.h"

namespace loom::kernels::cpu {

const char* bf16_gemm_kernel_name(Bf16GemmKernel k) {
  switch (k) {
    case Bf16GemmKernel::Avx512Bf16: return "avx512_bf16";
    case Bf16GemmKernel::Float32: return "float32";
    case Bf16GemmKernel::OneDnn: return "onednn";
  }
  return "?";
}

bool cpu_has_avx512_bf16() { return cpu_has_avx512() && cpu_features().avx512_bf16; }

namespace {

// Linux (5.16 on) lets a process use the AMX tiles once it asks for them: arch_prctl
// (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), as oneDNN does before it runs an AMX kernel.
bool os_permits_amx_tiles() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return true;
#endif
}

}  // namespace

bool cpu_has_amx_bf16() {
  static const bool has = cpu_features().amx_bf16 && cpu_features().amx_tile && os_permits_amx_tiles();
  return has;
}

bool bf16_gemm_kernel_available(Bf16GemmKernel k) {
  switch (k) {
    case Bf16GemmKernel::Avx512Bf16: return cpu_has_avx512_bf16();
    case Bf16GemmKernel::OneDnn: return onednn_matmul_available(DType::BFloat16);
    case Bf16GemmKernel::Float32: return true;
  }
  return false;
}

Bf16GemmKernel default_bf16_gemm_kernel() {
  // oneDNN's only where AMX runs it (brg:avx512_core_amx_bf16, ~15x the avx512_bf16 kernel);
  // without AMX, oneDNN's bfloat16 matmul is level with Loom's kernel (Note [bfloat16 GEMM]).
  static const Bf16GemmKernel k = cpu_has_amx_bf16() && onednn_matmul_available(DType::BFloat16)
                                      ? Bf16GemmKernel::OneDnn
                                      : cpu_has_avx512_bf16() ? Bf16GemmKernel::Avx512Bf16 : Bf16GemmKernel::Float32;
  return k;
}

namespace {

constexpr int kNotForced = -1;
std::atomic<int> forced_kernel{kNotForced};

const char* unavailable_reason(Bf16GemmKernel k) {
  return k == Bf16GemmKernel::OneDnn ? "oneDNN 2.6 has no bf16 primitive on this CPU (needs AVX-512)"
                                     : "this CPU has no AVX512-BF16";
}

// LOOM_CPU_BF16_GEMM, parsed and checked once (a static that throws is tried again, so an
// invalid value fails every bfloat16 GEMM with the same message rather than being ignored).
std::optional<Bf16GemmKernel> kernel_from_env() {
  static const std::optional<Bf16GemmKernel> k = [] {
    const char* value = std::getenv(kBf16GemmEnv);
    const std::optional<Bf16GemmKernel> parsed = parse_bf16_gemm_env(value);
    LOOM_CHECK(!parsed || bf16_gemm_kernel_available(*parsed), ValueError, kBf16GemmEnv, "=", value,
               ": that kernel cannot run here (", unavailable_reason(*parsed), "); the choices are onednn, ",
               "avx512_bf16 and float32, where available");
    return parsed;
  }();
  return k;
}

}  // namespace

Bf16GemmKernel bf16_gemm_kernel() {
  const int forced = forced_kernel.load(std::memory_order_relaxed);
  if (forced != kNotForced) return Bf16GemmKernel(forced);
  if (const std::optional<Bf16GemmKernel> env = kernel_from_env()) return *env;
  return default_bf16_gemm_kernel();
}

void force_bf16_gemm_kernel(std::optional<Bf16GemmKernel> k) {
  LOOM_CHECK(!k || bf16_gemm_kernel_available(*k), ValueError, "force_bf16_gemm_kernel: the ",
             bf16_gemm_kernel_name(*k), " kernel cannot run here: ", unavailable_reason(*k));
  forced_kernel.store(k ? int(*k) : kNotForced, std::memory_order_relaxed);
}

// B's elements at which packing is split across the threads.
constexpr int64_t kParallelPackElements = int64_t(1) << 18;

void pack_bf16_b(const Bf16Operand& b, int64_t K, int64_t N, PackedBf16B& p) {
  p.K = K;
  p.N = N;
  p.kernel = bf16_gemm_kernel();
  const bool threads = K * N >= kParallelPackElements && !in_parallel_region();
  if (p.kernel == Bf16GemmKernel::OneDnn) {
    // oneDNN's reorder into the primitive's layout, on this thread (onednn_matmul.h).
    onednn_pack_weights(b.m, b.dtype, K, N, DType::BFloat16, p.onednn);
    return;
  }
  if (p.kernel == Bf16GemmKernel::Avx512Bf16) {
    // Panels of columns are independent: each thread packs a run of them, from its slice
    // of B's columns into its run of panels.
    const int64_t Kp = (K + 1) / 2, panels = (N + 31) / 32;
    uint32_t* out = p.pairs.reserve(size_t(Kp * panels * 32));
    auto pack_panels = [&](int64_t j0, int64_t j1) {
      thread_local GrowingBuffer<uint32_t> column;  // each thread's own
      Bf16Operand slice = b;
      const int64_t n0 = j0 * 32, elem = b.dtype == DType::BFloat16 ? 2 : 4;
      slice.m.data = static_cast<const char*>(b.m.data) + (b.m.col_major ? n0 * b.m.ld : n0) * elem;
      pack_bf16_pairs_avx512bf16(slice, K, std::min(N, j1 * 32) - n0, out + j0 * Kp * 32, column.reserve(size_t(K / 2 + 1)));
    };
    if (threads) parallel_for(0, panels, std::max<int64_t>(1, (panels + get_num_threads() - 1) / get_num_threads()), pack_panels);
    else pack_panels(0, panels);
  } else {
    float* widened = p.widened.reserve(size_t(K * N));
    auto widen_rows = [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
        for (int64_t n = 0; n < N; ++n) widened[k * N + n] = bf16_to_float(operand_bits(b, k, n));
    };
    if (threads) parallel_for(0, K, std::max<int64_t>(1, (K + get_num_threads() - 1) / get_num_threads()), widen_rows);
    else widen_rows(0, K);
  }
}

void gemm_bf16(int64_t M, const Bf16Operand& a, const PackedBf16B& b, float* c, int64_t ldc, bool accumulate) {
  if (M == 0 || b.N == 0) return;
  if (b.K == 0) {  // an empty sum
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(c + m * ldc, c + m * ldc + b.N, 0.0f);
    return;
  }
  if (b.kernel == Bf16GemmKernel::OneDnn) {
    onednn_matmul(M, a.m, a.dtype, b.onednn, c, ldc, accumulate);
    return;
  }
  if (b.kernel == Bf16GemmKernel::Avx512Bf16) {
    thread_local GrowingBuffer<uint32_t> a_block;
    gemm_bf16_avx512bf16(M, a, b.pairs.data(), b.K, b.N, c, ldc, accumulate, a_block.reserve(kBf16PackABlock));
    return;
  }
  // float32: A rounded to bfloat16 and widened, then the float32 GEMM.
  thread_local GrowingBuffer<float> widened_a_buffer;
  float* widened_a = widened_a_buffer.reserve(size_t(M * b.K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < b.K; ++k) widened_a[m * b.K + k] = bf16_to_float(operand_bits(a, m, k));
  GemmArgs g;
  g.M = M;
  g.N = b.N;
  g.K = b.K;
  g.a = MatrixRef{widened_a, b.K, false};
  g.b = MatrixRef{b.widened.data(), b.N, false};
  g.c = c;
  g.ldc = ldc;
  g.beta = accumulate ? 1 : 0;
  g.dtype = DType::Float32;
  best_float_gemm()(g);
}

}  // namespace loom::kernels::cpu
