// Stateless forms of the layers, as torch.nn.functional. The ops themselves live in
// autograd/functions/ (as PyTorch's in ATen), each with its choice between a fused kernel and
// the composition it is tested against; this namespace names them as PyTorch does.
#pragma once

#include "autograd/functions/attention.h"
#include "autograd/functions/layer_norm.h"
#include "autograd/functions/linear.h"
#include "core/tensor.h"

namespace loom::nn::functional {

// y (..., out) = x (..., in) · weight (out, in)^T + bias (out) (autograd/functions/linear.h).
using ::loom::linear;
// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p).
Tensor dropout(const Tensor& x, double p, bool training);
// Layer norm over the trailing dims of normalized_shape (autograd/functions/layer_norm.h).
using ::loom::layer_norm;
// Attention as torch.nn.functional.scaled_dot_product_attention (autograd/functions/attention.h).
using ::loom::scaled_dot_product_attention;

namespace detail {
// The compositions the fused kernels are tested against (autograd/functions/).
using ::loom::detail::layer_norm_reference;
using ::loom::detail::sdpa_dropout_mask;
using ::loom::detail::sdpa_reference;
}  // namespace detail

}  // namespace loom::nn::functional

// torch.nn.attention: the attention implementations' names and the scope that picks them,
//   with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):      nn::attention::SdpaKernelGuard g(SDPBackend::CUDNN_ATTENTION);
//       out = F.scaled_dot_product_attention(q, k, v)  Tensor out = F::scaled_dot_product_attention(q, k, v);
namespace loom::nn::attention {
using ::loom::SDPBackend;
using ::loom::SdpaKernelGuard;
}  // namespace loom::nn::attention
