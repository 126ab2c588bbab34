// oneDNN's matmul primitive as a GEMM with B packed once, its primitives cached: the
// bfloat16 GEMM's onednn kernel (gemm_bf16.h), and the same code for float32 operands so
// the machinery runs (and is tested) on any x86-64.
//
// Note [oneDNN matmul primitive]
// C (M, N) float32 = A (M, K) · B (K, N), operands of one type T (float32 or bfloat16; a
// float32 A of a bfloat16 product is rounded to bfloat16 first, in a thread-local buffer:
// oneDNN 2.6 has no float32 x bfloat16 matmul).
// - B is reordered once by oneDNN into the layout the primitive prefers for it (weights
//   desc format_tag::any, asked of a primitive descriptor at kPackM rows; PyTorch's mkldnn
//   prepack): OneDnnPackedWeights. A recurrent sweep packs W_hh once and reuses it per step.
// - Creating a primitive descriptor and primitive costs far more than a small product, so
//   they are cached (lru_cache.h) by everything that shapes them: M, K, N, T, A's strides, ldc,
//   accumulate (the `sum` post-op) and the packed weights' desc. If a primitive at some M
//   prefers another weights layout than the packed one and its implementation cannot take the
//   packed one, the weights are reordered per call (counted: weight_reorders; 0 expected).
// - Scratchpad in user mode, from a thread-local growing buffer: no allocation per call and
//   no shared scratchpad between threads running one primitive at once.
// - One OpenMP thread per call (onednn_threads.h): Loom's pool splits C's rows.
// oneDNN 2.6 makes bfloat16 primitives only on CPUs with AVX-512 (avx512_core); on AMX CPUs
// it picks brg:avx512_core_amx_bf16 by itself. onednn_matmul_available says which type runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/growing_buffer.h"

namespace loom::kernels::cpu {

struct OneDnnWeightsLayout;  // oneDNN's memory desc of packed weights (onednn_matmul.cpp)

// B (K, N), of `dtype` (Float32 or BFloat16), in the layout oneDNN's matmul prefers.
struct OneDnnPackedWeights {
  int64_t K = 0, N = 0;
  DType dtype = DType::Float32;
  std::shared_ptr<const OneDnnWeightsLayout> layout;  // null until packed (or K or N is 0)
  GrowingBuffer<CacheLine> data;
};

// Rows of the primitive descriptor asked for the weights' layout when packing (its
// implementation picks the layout from N and K's blocking, not M, as far as we know).
constexpr int64_t kPackM = 128;

// Whether oneDNN makes a matmul primitive for `dtype` operands on this CPU (asked once).
bool onednn_matmul_available(DType dtype);
// The implementation oneDNN picks for an (M, K) · (K, N) product of `dtype`, e.g.
// "brg:avx512_core_amx_bf16" or "gemm:jit"; "unavailable" where it makes none.
std::string onednn_matmul_impl(DType dtype, int64_t M, int64_t K, int64_t N);

// Packs B (K, N) of `b_dtype` (row- or column-major, any ld) for `dtype` products into out,
// reusing its memory. A float32 B of a bfloat16 product is rounded to nearest even first.
void onednn_pack_weights(const MatrixRef& b, DType b_dtype, int64_t K, int64_t N, DType dtype,
                         OneDnnPackedWeights& out);

// C (M, N), row-major with row stride ldc, = A (M, K) · B, or += when accumulate. A is of
// w.dtype, or float32 where w.dtype is BFloat16. On the calling thread.
void onednn_matmul(int64_t M, const MatrixRef& a, DType a_dtype, const OneDnnPackedWeights& w, float* c,
                   int64_t ldc, bool accumulate);

// The primitive cache (bounded; least recently used out first). For tests and reports.
constexpr size_t kOneDnnMatmulCacheCapacity = 512;
struct OneDnnMatmulCacheStats {
  int64_t created = 0;          // primitives made (matmuls and the packing reorders)
  int64_t hits = 0;
  int64_t entries = 0;
  int64_t weight_reorders = 0;  // calls that reordered the packed weights again
};
OneDnnMatmulCacheStats onednn_matmul_cache_stats();
void clear_onednn_matmul_cache();

}  // namespace loom::kernels::cpu
