// The linear op (nn::functional::linear names it), which checks the arguments and runs the
// fused op with a bias where the operands agree, and the fused op (autograd/functions/
// linear.cpp).
#pragma once

#include "core/tensor.h"

namespace loom {

// y (..., out) = x (..., in) · weight (out, in)^T + bias (out), as torch.nn.functional.linear;
// under autocast all three in the lower precision.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// y (..., N) = x (..., K) · weight (N, K)^T + bias (N): the bias is written into y first
// and the GEMM adds the product to it (beta 1), so y is made in one pass and a 16-bit y is
// rounded once, as PyTorch's addmm. x, weight and bias of one floating dtype and device.
// Gradients flow to all three, and through a second backward (the backward is made of
// differentiable ops on the saved x and weight, as matmul's).
Tensor fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace loom
