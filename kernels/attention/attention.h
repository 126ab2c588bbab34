// The fused scaled-dot-product attention kernels (Note [online softmax] in
// kernels/attention/attention_math.h), entry points of the kernel layer as those of kernels/kernels.h:
// defined in kernels/router.cpp, which calls the device's backend.
//
// Shapes, all contiguous and of one float dtype unless said:
//   q (N, L, E), k (N, S, E), v (N, S, Ev), out and grad_out (N, L, Ev), dq, dk, dv as q,
//   k, v; each of these may instead be 4-D, (B, H, rows, cols) with N = B·H, a unit column
//   stride and any other strides (Note [attention head layouts] in
//   kernels/attention/attention_layout.h), all of one call 3-D or all 4-D,
//   lse (N, L): each query row's logsumexp of its scaled, masked scores (+inf for a row
//   whose keys are all masked: its weights, output and gradients are 0, as in PyTorch),
//   float64 for float64 operands and float32 for the others (a 16-bit lse would round
//   every weight the backward recomputes from it),
//   bias: undefined, or an additive mask of q's dtype viewed as (N, L, S), or as (B, H, L,
//   S) for 4-D operands, with any strides (0 on broadcast dims; -inf masks a key out).
// causal keeps keys j <= i (top-left aligned); scale multiplies q k^T before the bias.
// dropout (p > 0) drops weights after the softmax by the keep bits of its Philox stream,
// the same in the forward and the backward and on every device (Note [attention dropout]
// in kernels/attention/attention_dropout.h); out is then the dropped output, lse the undropped one.
#pragma once

#include <string>

#include "core/tensor.h"
#include "kernels/attention/attention_backend.h"
#include "kernels/attention/attention_dropout.h"

namespace loom::kernels {

// Loom's own fused kernels (the FLASH_ATTENTION tier, Note [attention tiers] in
// kernels/attention/attention_backend.h).
void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout = {});
// dq, dk, dv (q's, k's, v's shapes) overwritten; lse and out are the forward's.
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout = {});
// cuDNN's fused attention graphs (the CUDNN_ATTENTION tier, Note [cuDNN attention plans] in
// kernels/attention/cudnn_attention_plan.h), with the same contract on a GPU, for calls
// attention_refusal(CUDNN_ATTENTION, ...) accepts. Its dropout draws cuDNN's own bits from
// the same (seed, offset) (so not the keep bits of Note [attention dropout]), the same in
// its forward and backward; out, dq, dk and dv laid out as fused_attention makes them
// (attention_output_strides), and grad_out too or it is copied so.
void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout = {});
void cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout = {});
// Whether a 4-D (B, H, rows, cols) operand can be read or written where it is: a unit column
// stride and rows that do not overlap (each row is a GEMM operand row, its stride the ld).
bool attention_heads_in_place(const Tensor& t);
// Why the fused tier `backend` (FLASH_ATTENTION or CUDNN_ATTENTION) of q's device would not
// run a call on q, k, v and bias as the entry points above take them, with dropout_p and,
// when needs_backward, its backward too; "" when it would (MATH: always "").
std::string attention_refusal(SDPBackend backend, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& bias, bool causal, double dropout_p, bool needs_backward);

}  // namespace loom::kernels
