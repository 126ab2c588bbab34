// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#pragma once

#include <limits>
#include <vector>

#include "core/tensor.h"

namespace loom::optim {

// Scales all gradients so that their joint p-norm is at most max_norm; returns the norm
// before clipping (p = inf for the max norm; NaN when a gradient holds a NaN), as a () float64
// tensor on the gradients' device (a CPU zero when no parameter has a gradient). On a GPU
// nothing is read back: the host does not wait (call .item() on the result when you want
// the number, which waits).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace loom::optim
