// The math of the fused multi-tensor norm (kernels::multi_tensor_norm, clip_grad_norm_'s
// total norm), shared by the CPU loop (kernels/cpu/norm.cpp) and the CUDA kernels
// (kernels/cuda/norm.cu) as LOOM_HOST_DEVICE code, so that the CPU tests cover it.
//
// Note [fixed-order norm]
// The result must not depend on the thread count or on how work is scheduled, so the order
// of every sum is fixed by the data alone: each tensor is cut into chunks of kNormChunk
// elements (a CUDA block's share, a CPU task's); in a chunk, the terms are summed in the
// element's opmath type (float for float32 and 16-bit) in runs of at most kNormRun terms,
// and those run sums in double, in a fixed order, into the chunk's partial; the partials are
// folded in double in list order. Threads only decide which chunk runs when, never what is
// added to what, so one and eight threads give the same bits. (The CPU's and the GPU's
// orders differ: equal within rounding, not bit for bit.)
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"

namespace loom::kernels {

constexpr int64_t kNormChunk = 16384;  // elements of one partial: a CUDA block's, a CPU task's
constexpr int64_t kNormRun = 64;       // terms summed in float before a double takes them

// Which p: the ones with a cheaper term than pow, and the general one.
enum class NormKind { One, Two, Inf, P };

inline NormKind norm_kind(double p) {
  if (std::isinf(p)) return NormKind::Inf;
  if (p == 1) return NormKind::One;
  if (p == 2) return NormKind::Two;
  return NormKind::P;
}

// One element's term, |x|^p (for inf: |x|, folded by max_or_nan).
template <typename M>
LOOM_HOST_DEVICE inline M norm_term(M x, NormKind kind, M p) {
  const M a = x < M(0) ? -x : x;
  switch (kind) {
    case NormKind::One:
    case NormKind::Inf: return a;
    case NormKind::Two: return a * a;
    default: return std::pow(a, p);
  }
}

// max that keeps a NaN (NaN > m and m > NaN are both false): a NaN gradient, a NaN norm.
template <typename M>
LOOM_HOST_DEVICE inline M max_or_nan(M m, M v) {
  return (v > m || v != v) ? v : m;
}

// Folds a term or a partial into an accumulator: a sum, or max for p = inf.
template <typename M>
LOOM_HOST_DEVICE inline M norm_fold(M acc, M v, NormKind kind) {
  return kind == NormKind::Inf ? max_or_nan(acc, v) : acc + v;
}

// The norm from the folded total: total^(1/p) (inf: the max itself).
LOOM_HOST_DEVICE inline double norm_root(double total, NormKind kind, double p) {
  switch (kind) {
    case NormKind::One:
    case NormKind::Inf: return total;
    case NormKind::Two: return sqrt(total);
    default: return pow(total, 1.0 / p);
  }
}

}  // namespace loom::kernels
