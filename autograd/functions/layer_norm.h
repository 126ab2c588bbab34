// Layer norm (nn::functional::layer_norm names it): the op, which checks the arguments and
// runs the fused op with its backward when the device has the kernels (kernels/norm/
// layer_norm.h), else the composition it is tested against (autograd/functions/layer_norm.cpp).
#pragma once

#include "core/tensor.h"

namespace loom {

// Normalises over the trailing dims of normalized_shape: (x - mean) / sqrt(var + eps),
// then * weight + bias (both optional, of normalized_shape). On the CPU one fused kernel
// each way (Note [fused layer norm], kernels/cpu/layer_norm.cpp); 16-bit inputs compute in
// float32 and round once.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

namespace detail {
// The composition of ops (mean, subtract, square, mean, rsqrt, multiply, add) the fused
// layer-norm kernels are tested against; the path of devices without them.
Tensor layer_norm_reference(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                            double eps);
}  // namespace detail

// y (x's shape) = layer norm of x over its last n elements (x.numel() a multiple of n,
// n > 0), then * weight + bias (each (n) elements or undefined, of x's dtype or float32 for
// a 16-bit x). Gradients flow to x, weight and bias.
Tensor fused_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t n, double eps);

}  // namespace loom
