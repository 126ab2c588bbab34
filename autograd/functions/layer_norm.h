// The fused layer-norm op with its backward (autograd/functions/layer_norm.cpp);
// nn::functional::layer_norm (nn/functional.cpp) checks the arguments and calls it when the
// device has the kernels (kernels/layer_norm.h).
#pragma once

#include "core/tensor.h"

namespace loom {

// y (x's shape) = layer norm of x over its last n elements (x.numel() a multiple of n,
// n > 0), then * weight + bias (each (n) elements or undefined, of x's dtype or float32 for
// a 16-bit x). Gradients flow to x, weight and bias.
Tensor fused_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t n, double eps);

}  // namespace loom
