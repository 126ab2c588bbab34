// Stateless forms of the layers, as torch.nn.functional.
#pragma once

#include "core/tensor.h"

namespace loom::nn::functional {

// y (..., out) = x (..., in) · weight (out, in)^T + bias (out)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p).
Tensor dropout(const Tensor& x, double p, bool training);
// Normalises over the trailing dims of normalized_shape: (x - mean) / sqrt(var + eps),
// then * weight + bias (both optional, of normalized_shape).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace loom::nn::functional
