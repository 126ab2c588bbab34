// The fused scaled-dot-product attention kernels (Note [online softmax] in
// kernels/attention_math.h), entry points of the kernel layer as those of kernels/kernels.h:
// defined in kernels/router.cpp, which calls the device's backend.
//
// Shapes, all contiguous and of one float dtype unless said:
//   q (N, L, E), k (N, S, E), v (N, S, Ev), out and grad_out (N, L, Ev), dq, dk, dv as q,
//   k, v; on the CPU each of these may instead be 4-D, (B, H, rows, cols) with N = B·H, a
//   unit column stride and any other strides (Note [attention head layouts]),
//   lse (N, L): each query row's logsumexp of its scaled, masked scores (+inf for a row
//   whose keys are all masked: its weights, output and gradients are 0, as in PyTorch),
//   float64 for float64 operands and float32 for the others (a 16-bit lse would round
//   every weight the backward recomputes from it),
//   bias: undefined, or an additive mask of q's dtype viewed as (N, L, S) with any strides
//   (0 on broadcast dims; -inf masks a key out).
// causal keeps keys j <= i (top-left aligned); scale multiplies q k^T before the bias.
// dropout (p > 0) drops weights after the softmax by the keep bits of its Philox stream,
// the same in the forward and the backward and on every device (Note [attention dropout]
// in kernels/attention_dropout.h); out is then the dropped output, lse the undropped one.
#pragma once

#include "core/tensor.h"
#include "kernels/attention_dropout.h"

namespace loom::kernels {

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout = {});
// dq, dk, dv (q's, k's, v's shapes) overwritten; lse and out are the forward's.
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout = {});
// Whether a 4-D (B, H, rows, cols) operand can be read or written where it is: a unit column
// stride and rows that do not overlap (each row is a GEMM operand row, its stride the ld).
bool attention_heads_in_place(const Tensor& t);
// Whether q's device's backend has fused kernels for q (N, L, E) and v (N, S, Ev): their
// dtype and head dims E, Ev (else the caller composes the ops).
bool has_attention_kernels(const Tensor& q, const Tensor& v);

}  // namespace loom::kernels
