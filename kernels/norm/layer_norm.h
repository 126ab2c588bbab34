// The fused layer-norm kernels (Note [fused layer norm] in kernels/cpu/layer_norm.cpp),
// entry points of the kernel layer as those of kernels/kernels.h: defined in
// kernels/router.cpp, which calls the device's backend.
//
// Shapes, all contiguous:
//   x, y, dy, dx (M, N): rows normalised over their N elements, of one float dtype X;
//   mean, rstd (M): each row's mean and 1 / sqrt(biased variance + eps), float64 for a
//   float64 X and float32 for the others (as PyTorch's native_layer_norm saves them);
//   weight, bias, dweight, dbias (N) or undefined: of X, or float32 when X is 16-bit (the
//   float32 parameters of a model run under CPU autocast).
#pragma once

#include "core/tensor.h"

namespace loom::kernels {

// y = (x - mean) * rstd * weight + bias, each factor skipped where undefined.
void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps);
// The gradients of the forward for dy: each of dx, dweight, dbias is overwritten, or not
// computed where undefined (dweight and dbias undefined where weight and bias are).
void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight);
// Whether x's device's backend has these kernels (else the caller composes the ops).
bool has_layer_norm_kernels(const Tensor& x);

}  // namespace loom::kernels
