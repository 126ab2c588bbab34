// Stateless forms of the layers, as torch.nn.functional.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "kernels/attention_backend.h"

namespace loom::nn::functional {

// y (..., out) = x (..., in) · weight (out, in)^T + bias (out)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p).
Tensor dropout(const Tensor& x, double p, bool training);
// Normalises over the trailing dims of normalized_shape: (x - mean) / sqrt(var + eps),
// then * weight + bias (both optional, of normalized_shape). On the CPU one fused kernel
// each way (Note [fused layer norm], kernels/cpu/layer_norm.cpp); 16-bit inputs compute in
// float32 and round once.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// Attention as torch.nn.functional.scaled_dot_product_attention (nn/attention.cpp):
//   out (..., L, Ev) = dropout(softmax(scale * query key^T + mask)) value
// for query (..., L, E), key (..., S, E), value (..., S, Ev), whose leading dims broadcast.
// attn_mask, optional, broadcasts to (..., L, S): bool (true = may attend) or additive of
// the query's dtype. is_causal masks keys j > i (and excludes attn_mask); scale defaults to
// 1 / sqrt(E). A query row with every key masked gets output 0 and gradients 0, as in
// PyTorch 2.x. dropout_p > 0 drops weights (as PyTorch, whatever the module's mode: pass
// 0 in evaluation). Three implementations, the first that takes the call running it (Note
// [attention tiers], kernels/attention_backend.h; nn::attention::SdpaKernelGuard restricts
// them): cuDNN's fused attention (float16 and bfloat16 on a GPU), Loom's fused kernels (the
// CPU's; the GPU's for float32 and 16-bit with head dims up to 128), the composition of
// ops. The fused ones never store the (L, S) weights (Note [online softmax],
// kernels/attention_math.h), nor the dropout mask, which they draw from the default
// generator's stream (Note [attention dropout], kernels/attention_dropout.h).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

namespace detail {
// The composition of ops (mean, subtract, square, mean, rsqrt, multiply, add) the fused
// layer-norm kernels are tested against; the path of devices without them.
Tensor layer_norm_reference(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                            double eps);
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
}  // namespace detail

}  // namespace loom::nn::functional

// torch.nn.attention: the attention implementations' names and the scope that picks them,
//   with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):      nn::attention::SdpaKernelGuard g(SDPBackend::CUDNN_ATTENTION);
//       out = F.scaled_dot_product_attention(q, k, v)  Tensor out = F::scaled_dot_product_attention(q, k, v);
namespace loom::nn::attention {
using kernels::SDPBackend;
using kernels::SdpaKernelGuard;
}  // namespace loom::nn::attention
