// The fused linear op with a bias (autograd/functions/linear.cpp); nn::functional::linear
// (nn/functional.cpp) checks the arguments and calls it.
#pragma once

#include "core/tensor.h"

namespace loom {

// y (..., N) = x (..., K) · weight (N, K)^T + bias (N): the bias is written into y first
// and the GEMM adds the product to it (beta 1), so y is made in one pass and a 16-bit y is
// rounded once, as PyTorch's addmm. x, weight and bias of one floating dtype and device.
// Gradients flow to all three, and through a second backward (the backward is made of
// differentiable ops on the saved x and weight, as matmul's).
Tensor fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace loom
