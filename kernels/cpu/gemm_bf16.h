// The bfloat16 GEMM of the CPU: C (float32) = A · B with A and B rounded to bfloat16 and
// the products summed in float32, as PyTorch's CPU matmul of bfloat16 tensors (oneDNN).
//
// Note [bfloat16 GEMM]
// Three kernels, picked at run time (kernels/cpu/gemm_bf16.cpp):
// - onednn (kernels/cpu/onednn_matmul.cpp, Note [oneDNN matmul primitive] there): oneDNN's
//   matmul primitive, src bfloat16, weights bfloat16, dst float32, accumulate as the `sum`
//   post-op. B is reordered once by oneDNN into the primitive's preferred weights layout
//   (PackedBf16B::onednn); primitives are cached by shape, strides, ldc, accumulate and
//   layout; a float32 A is rounded to bfloat16 first. On AMX CPUs oneDNN picks
//   brg:avx512_core_amx_bf16 by itself (3,100 GFLOP/s reported against ~215 for
//   avx512_bf16), so that is where it is the default: AMX-BF16 and AMX-TILE usable
//   (cpu_has_amx_bf16) and a oneDNN that makes a bfloat16 primitive. oneDNN 2.6 makes none
//   without AVX-512.
// - avx512_bf16 (kernels/cpu/gemm_bf16_avx512bf16.cpp): AVX512-BF16's vdpbf16ps, which
//   multiplies pairs of bfloat16 and adds both products into one float32 lane. B is packed
//   into panels of 32 columns holding (b[2p][n], b[2p+1][n]) pairs, A into blocks of up to
//   12 rows of (a[m][2p], a[m][2p+1]) pairs (a row-major A's rows copied as they are, their
//   adjacent bfloat16 already pairs; a column-major A's pairs gathered 12 rows per load);
//   a 12 x 32 tile of C lives in 24 registers, each A pair one broadcast. The default with
//   AVX512-BF16 and no AMX.
// - float32: the operands, rounded to bfloat16, widened back to float32 and multiplied by
//   the float32 GEMM (gemm.h): the same products on any x86-64, at float32 speed.
// All round each operand once (to nearest even), so they differ only in the order of the
// float32 sums. B is packed on its own (PackedBf16B) so a recurrent sweep packs W_hh once
// and reuses it at every step. Measured on a 2-core AVX512-BF16 CPU without AMX (bench_core's
// gemm_bf16 lines), Debian's oneDNN 2.6.3 matmul (brg:avx512_core_bf16, weights reordered
// once) is level with the avx512_bf16 kernel: 342 / 244 GFLOP/s at 1024³ / 2048³ against
// 262 / 334, and 207 against 196 GFLOP/s on one thread at an LSTM step's (64 x 256) ·
// (256 x 1024); hence avx512_bf16 stays the default there.
// LOOM_CPU_BF16_GEMM=onednn|avx512_bf16|float32 forces a kernel (gemm_env.h; an unknown or
// unavailable one is a ValueError at the first bfloat16 GEMM); loom-info (loom-cpu-info)
// prints the one chosen. Not yet measured on an AMX CPU: docs/benchmarks.md, "bfloat16 GEMM
// on AMX", lists what to measure there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/cpu/onednn_matmul.h"

namespace loom::kernels::cpu {

enum class Bf16GemmKernel { Avx512Bf16, Float32, OneDnn };

const char* bf16_gemm_kernel_name(Bf16GemmKernel k);
bool cpu_has_avx512_bf16();  // AVX512-BF16 with AVX-512 F/BW/DQ/VL (core/cpu_features.h)
// AMX with bfloat16 tiles (AMX-BF16 and AMX-TILE, and on Linux the permission to use them,
// asked for once), where oneDNN runs brg:avx512_core_amx_bf16 (Note [bfloat16 GEMM]).
bool cpu_has_amx_bf16();
// Whether this CPU and oneDNN can run `k` (onednn: oneDNN makes a bfloat16 matmul primitive).
bool bf16_gemm_kernel_available(Bf16GemmKernel k);
// The kernel the CPU picks by itself: onednn on AMX CPUs where oneDNN makes the primitive,
// else avx512_bf16 with AVX512-BF16, else float32.
Bf16GemmKernel default_bf16_gemm_kernel();
// The kernel in use: a forced one (force_bf16_gemm_kernel), else LOOM_CPU_BF16_GEMM's (read
// once; an unknown or unavailable value throws loom::ValueError, gemm_env.h), else the default.
Bf16GemmKernel bf16_gemm_kernel();
// Forces a kernel (nullopt: back to the environment's or the CPU's). Throws loom::ValueError
// for a kernel this CPU cannot run. Process-wide; meant for tests and benchmarks.
void force_bf16_gemm_kernel(std::optional<Bf16GemmKernel> k);

// An operand of the bfloat16 GEMM: float32 or bfloat16 elements, rounded when packed.
struct Bf16Operand {
  MatrixRef m;
  DType dtype = DType::BFloat16;
};

// B (K, N), packed for the kernel that was in use when it was packed.
struct PackedBf16B {
  int64_t K = 0, N = 0;
  Bf16GemmKernel kernel = Bf16GemmKernel::Float32;
  GrowingBuffer<uint32_t> pairs;  // avx512_bf16: panels of 32 columns x ceil(K/2) pairs
  GrowingBuffer<float> widened;   // float32: (K, N) row-major, values rounded to bfloat16
  OneDnnPackedWeights onednn;     // onednn: bfloat16, in the matmul primitive's layout
};

// Packs B into `out`, reusing its memory.
void pack_bf16_b(const Bf16Operand& b, int64_t K, int64_t N, PackedBf16B& out);

// C (M, N), row-major with row stride ldc, = A (M, K) · B, or += when accumulate. On the
// calling thread.
void gemm_bf16(int64_t M, const Bf16Operand& a, const PackedBf16B& b, float* c, int64_t ldc, bool accumulate);

// The avx512_bf16 kernel's halves (gemm_bf16_avx512bf16.cpp; CPUs with AVX512-BF16 only).
// Their scratch memory comes from the caller: that file holds no inline code of others
// (std containers included) that the linker could pick over a baseline copy.
constexpr int64_t kBf16PackABlock = 192 * 512;  // uint32 of gemm_bf16_avx512bf16's scratch
void pack_bf16_pairs_avx512bf16(const Bf16Operand& b, int64_t K, int64_t N, uint32_t* out,
                                uint32_t* scratch /* K / 2 */);
void gemm_bf16_avx512bf16(int64_t M, const Bf16Operand& a, const uint32_t* b_pairs, int64_t K, int64_t N, float* c,
                          int64_t ldc, bool accumulate, uint32_t* scratch /* kBf16PackABlock */);

}  // namespace loom::kernels::cpu
