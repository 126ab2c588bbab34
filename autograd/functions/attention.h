// The fused scaled-dot-product attention op with its backward (autograd/functions/
// attention.cpp); nn::functional::scaled_dot_product_attention (nn/attention.cpp) checks
// the arguments, chooses the tier (Note [attention tiers] in kernels/attention_backend.h)
// and calls it for the two fused ones.
#pragma once

#include "core/tensor.h"
#include "kernels/attention_backend.h"

namespace loom {

// out (N, L, Ev) = softmax(scale * q k^T + bias) v for q (N, L, E), k (N, S, E),
// v (N, S, Ev), one float dtype and device, through the fused kernels of `backend`
// (FLASH_ATTENTION: kernels::attention_forward; CUDNN_ATTENTION: kernels::
// cudnn_attention_forward), whose backward the node runs too; bias is undefined or an
// additive mask viewed as (N, L, S), with no gradient; causal keeps keys j <= i. Gradients
// flow to q, k and v. dropout_p > 0 drops weights by bits drawn from the default
// generator's stream (Note [attention dropout] in kernels/attention_dropout.h), which the
// backward draws again.
// q, k and v may also be (B, H, L, E), (B, H, S, E), (B, H, S, Ev) views with a unit last
// stride, read in place (Note [attention head layouts] in kernels/attention_layout.h), the
// bias then (B, H, L, S): out is then (B, H, L, Ev), laid out as (B, L, H, Ev), and so are
// the gradients.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal,
                       double scale, double dropout_p = 0,
                       kernels::SDPBackend backend = kernels::SDPBackend::FLASH_ATTENTION);

// An operand as fused_attention reads it: a (N, rows, cols) tensor made contiguous, a
// (B, H, rows, cols) one as it is where it can be read in place (kernels::
// attention_heads_in_place), else contiguous. What the tiers are asked about must be this.
Tensor fused_attention_operand(const Tensor& t);

}  // namespace loom
