// The fused scaled-dot-product attention op with its backward (autograd/functions/
// attention.cpp); nn::functional::scaled_dot_product_attention (nn/attention.cpp) checks
// the arguments and calls it when the fused kernels apply.
#pragma once

#include "core/tensor.h"

namespace loom {

// out (N, L, Ev) = softmax(scale * q k^T + bias) v for q (N, L, E), k (N, S, E),
// v (N, S, Ev), one float dtype and device, through the fused kernels
// (kernels/attention.h); bias is undefined or an additive mask viewed as (N, L, S), with
// no gradient; causal keeps keys j <= i. Gradients flow to q, k and v. dropout_p > 0
// drops weights by keep bits drawn from the default generator (Note [attention dropout] in
// kernels/attention_dropout.h), which the backward draws again.
// On the CPU q, k and v may also be (B, H, L, E), (B, H, S, E), (B, H, S, Ev) views with a
// unit last stride, read in place (Note [attention head layouts] in kernels/cpu/attention.cpp):
// out is then (B, H, L, Ev), laid out as (B, L, H, Ev), and so are the gradients.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal,
                       double scale, double dropout_p = 0);

}  // namespace loom
