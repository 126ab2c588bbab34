// Scaled-dot-product attention: the op (autograd/functions/sdpa.cpp), which checks the
// arguments and chooses the tier (Note [attention tiers] in kernels/attention/
// attention_backend.h), the composition it is tested against, and the fused op with its
// backward (autograd/functions/attention.cpp) that it calls for the two fused tiers.
// nn::functional and nn::attention name them as torch.nn.functional and torch.nn.attention.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "kernels/attention/attention_backend.h"

namespace loom {

using kernels::SDPBackend;
using kernels::SdpaKernelGuard;

// Attention as torch.nn.functional.scaled_dot_product_attention:
//   out (..., L, Ev) = dropout(softmax(scale * query key^T + mask)) value
// for query (..., L, E), key (..., S, E), value (..., S, Ev), whose leading dims broadcast.
// attn_mask, optional, broadcasts to (..., L, S): bool (true = may attend) or additive of
// the query's dtype. is_causal masks keys j > i (and excludes attn_mask); scale defaults to
// 1 / sqrt(E). A query row with every key masked gets output 0 and gradients 0, as in
// PyTorch 2.x. dropout_p > 0 drops weights (as PyTorch, whatever the module's mode: pass
// 0 in evaluation). Three implementations, the first that takes the call running it (Note
// [attention tiers], kernels/attention/attention_backend.h; SdpaKernelGuard restricts
// them): cuDNN's fused attention (float16 and bfloat16 on a GPU), Loom's fused kernels (the
// CPU's; the GPU's for float32 and 16-bit with head dims up to 128), the composition of
// ops. The fused ones never store the (L, S) weights (Note [online softmax],
// kernels/attention/attention_math.h), nor the dropout mask, which they draw from the default
// generator's stream (Note [attention dropout], kernels/attention/attention_dropout.h).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

namespace detail {
// The plain composition of ops (matmul, scale, mask, softmax, dropout, matmul) the fused
// kernels are tested against; the path for the dtypes and devices they do not take. With
// dropout_p > 0 it draws its own dropout mask, or, given dropout_keep (bool, broadcasting to
// (..., L, S), true = kept), drops the weights where that is false.
Tensor sdpa_reference(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                      double dropout_p, bool is_causal, std::optional<double> scale,
                      const Tensor& dropout_keep = Tensor());
// The keep mask (N, L, S), bool on the CPU, that the fused kernels draw for batch entries
// merged into N (q (N, L, E), k (N, S, E)) from the Philox stream (seed, offset) with
// dropout_p = p (Note [attention dropout]): the generator's (seed, offset) just before the
// call gives the mask that call used.
Tensor sdpa_dropout_mask(uint64_t seed, uint64_t offset, int64_t N, int64_t L, int64_t S, double p);
// How many times the fused kernels' forward has run in this process (a checkpoint's kept
// outputs are not a run): for tests of CheckpointOptions::keep_attention.
uint64_t fused_attention_forward_count();
}  // namespace detail

// out (N, L, Ev) = softmax(scale * q k^T + bias) v for q (N, L, E), k (N, S, E),
// v (N, S, Ev), one float dtype and device, through the fused kernels of `backend`
// (FLASH_ATTENTION: kernels::attention_forward; CUDNN_ATTENTION: kernels::
// cudnn_attention_forward), whose backward the node runs too; bias is undefined or an
// additive mask viewed as (N, L, S), with no gradient; causal keeps keys j <= i. Gradients
// flow to q, k and v. dropout_p > 0 drops weights by bits drawn from the default
// generator's stream (Note [attention dropout] in kernels/attention/attention_dropout.h), which the
// backward draws again.
// q, k and v may also be (B, H, L, E), (B, H, S, E), (B, H, S, Ev) views with a unit last
// stride, read in place (Note [attention head layouts] in kernels/attention/attention_layout.h), the
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
