// The per-row arithmetic of fused scaled-dot-product attention, shared by the CPU kernel
// (kernels/cpu/attention.cpp) and any device kernel, so every backend masks, rescales and
// finishes a row the same way.
//
// Note [online softmax]
// Attention out_i = sum_j softmax_j(s_ij) v_j with s_ij = scale * q_i . k_j + bias_ij needs
// the row's max and sum of exponentials before any weight is known. The online form
// (Milakov & Gimelshein; FlashAttention) visits the keys a tile at a time and keeps, per
// query row, the running max m, the running sum l = sum_j exp(s_ij - m) and the unnormalised
// output acc = sum_j exp(s_ij - m) v_j. A tile whose max raises m to m' first multiplies l and
// acc by alpha = exp(m - m'), then adds its own exp(s_ij - m') terms: after the last tile
// out_i = acc / l, and the row's logsumexp lse_i = m + log(l) is all the forward keeps. So
// only a (rows, keys) tile of scores ever exists, never the (L, S) matrix.
// The backward (FlashAttention-2) recomputes each tile's weights as p_ij = exp(s_ij - lse_i),
// and with D_i = sum_c dout_ic out_ic (= sum_j p_ij dp_ij):
//   dv_j += p_ij dout_i,  dp_ij = dout_i . v_j,  ds_ij = p_ij (dp_ij - D_i),
//   dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i.
// A row whose keys are all masked (every s_ij = -inf) has l = 0: its output is 0 and its
// lse +inf, which makes every recomputed p_ij and so every gradient 0 — what PyTorch 2.x
// gives (its safe softmax), not the NaN of a plain softmax.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/half.h"

namespace loom::kernels::attention_math {

template <typename M>
LOOM_HOST_DEVICE inline M minus_inf() {
  return -std::numeric_limits<M>::infinity();
}

// Whether causal attention hides key j from query i (top-left aligned, as PyTorch's
// is_causal: the lower triangle j <= i is kept, whatever L and S are).
LOOM_HOST_DEVICE inline bool causal_hidden(bool causal, int64_t i, int64_t j) { return causal && j > i; }

// The first key past what causal query row `last_row` may see: keys [0, key_end) are visited.
LOOM_HOST_DEVICE inline int64_t key_end(bool causal, int64_t last_row, int64_t S) {
  return causal ? (last_row + 1 < S ? last_row + 1 : S) : S;
}

// alpha = exp(m_old - m_new), the factor the running sum and output are rescaled by when
// a tile raises the max; 1 while nothing has been seen (both -inf).
template <typename M>
LOOM_HOST_DEVICE inline M rescale_factor(M m_old, M m_new) {
  return m_new == minus_inf<M>() ? M(1) : std::exp(m_old - m_new);
}

// The subtrahend of a row's exponentials: its max, or 0 while it is -inf (then every
// exp(s - 0) with s = -inf is 0, not the NaN of -inf - -inf).
template <typename M>
LOOM_HOST_DEVICE inline M safe_shift(M m) {
  return m == minus_inf<M>() ? M(0) : m;
}

// 1 / l for the final normalisation, 0 for a row with every key masked (l = 0).
template <typename M>
LOOM_HOST_DEVICE inline M inverse_sum(M l) {
  return l > M(0) ? M(1) / l : M(0);
}

// lse = m + log(l); +inf for a row with every key masked, so exp(s - lse) = 0 in backward.
template <typename M>
LOOM_HOST_DEVICE inline M row_logsumexp(M m, M l) {
  return l > M(0) ? m + std::log(l) : std::numeric_limits<M>::infinity();
}

}  // namespace loom::kernels::attention_math
