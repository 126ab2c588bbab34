// The dropout of fused scaled-dot-product attention: which weights a call keeps, as a
// function of its Philox stream, shared by the CPU kernel (kernels/cpu/attention.cpp), the
// CUDA kernel (kernels/cuda/attention.cu) and the test helper that returns the mask
// (nn::functional::detail::sdpa_dropout_mask), so that the mask is never stored.
//
// Note [attention dropout]
// keep(n, i, j), for query row i and key j of batch entry n, is a pure function of the
// call's (seed, offset), of p, and of (n, i, j, L, S): global row g = n L + i takes the
// ceil(S / 4) Philox blocks from block offset + g ceil(S / 4) on (core/generator.h), and
// key j the word j % 4 of block j / 4 of its row; it is kept when that word is >= the
// threshold floor(p 2^32), an integer compare, so every backend and every tiling draws the
// same bits (tiles start at multiples of 4 keys: each 4 keys cost one Philox block). The
// forward reserves N L ceil(S / 4) blocks of the default generator and the backward reuses
// the forward's (seed, offset), so it regenerates the same bits.
// With P_ij = softmax_j(s_ij) the weights and Z_ij = keep_ij / (1 - p) (0 or 1 / (1 - p)),
// as PyTorch's dropout of the weights:
//   out_i = sum_j P_ij Z_ij v_j,  lse_i = the undropped logsumexp (the forward applies Z to
//   a tile of exp(s - m) after adding it to the running sum, before the P V product).
// Backward, with dout_i given and dP~_ij = dout_i . v_j the gradient of the dropped weight:
//   dv_j = sum_i P_ij Z_ij dout_i
//   dP_ij = Z_ij dP~_ij (the gradient of the undropped weight)
//   ds_ij = P_ij (dP_ij - sum_k P_ik dP_ik)   (softmax backward)
// and sum_k P_ik dP_ik = sum_k P_ik Z_ik (dout_i . v_k) = dout_i . out_i = D_i, the same
// rowsum(dout * out) as without dropout, from the dropped output the forward returned. So
//   ds_ij = P_ij (Z_ij dP~_ij - D_i),  dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i,
// FlashAttention-2's form; p = 0 gives Z = 1 and Note [online softmax]'s formulas.
#pragma once

#include <cstdint>

#include "core/generator.h"

namespace loom::kernels {

// The dropout of one fused attention call: p, and the Philox stream its keep bits come
// from (Note [attention dropout]). p = 0: none.
struct AttentionDropout {
  double p = 0;
  uint64_t seed = 0, offset = 0;
};

namespace attention_dropout {

// Philox blocks a call on q (N, L, E), k (N, S, E) reserves.
inline uint64_t blocks(int64_t N, int64_t L, int64_t S) { return uint64_t(N) * uint64_t(L) * ((uint64_t(S) + 3) / 4); }

// What a kernel needs to draw keep bits: the stream, ceil(S / 4) blocks a row, the threshold.
struct KeepMask {
  uint64_t seed, offset, row_blocks;
  uint32_t threshold;  // a word >= threshold keeps its weight
};

inline KeepMask keep_mask(const AttentionDropout& d, int64_t S) {
  // p < 1, so p 2^32 < 2^32: the truncation fits.
  return {d.seed, d.offset, (uint64_t(S) + 3) / 4, uint32_t(d.p * 4294967296.0)};
}

// The Philox block of keys j .. j + 3 (j a multiple of 4) of global row g = n L + i.
LOOM_HOST_DEVICE inline uint64_t block_of(const KeepMask& m, int64_t g, int64_t j) {
  return m.offset + uint64_t(g) * m.row_blocks + uint64_t(j) / 4;
}

// The keep bits of keys j .. j + 3 (j a multiple of 4) of global row g = n L + i: bit e
// for key j + e (bits past S are drawn too, and meaningless).
LOOM_HOST_DEVICE inline unsigned keep_bits4(const KeepMask& m, int64_t g, int64_t j) {
  const auto w = Philox::block(m.seed, block_of(m, g, j));
  return unsigned(w[0] >= m.threshold) | unsigned(w[1] >= m.threshold) << 1 | unsigned(w[2] >= m.threshold) << 2 |
         unsigned(w[3] >= m.threshold) << 3;
}

}  // namespace attention_dropout
}  // namespace loom::kernels
