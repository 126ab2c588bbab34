// Gradient clipping (optim/clip_grad.h). The norm is accumulated as a float64 scalar tensor
// on the gradients' device, in parameter order (the same sums a host loop would do). On the
// CPU it is then read (at no cost) and the gradients are scaled only when clipped; on a GPU
// the clip coefficient stays on the device and every gradient is multiplied by it (by 1 when
// not clipped, which changes nothing), as PyTorch's clip_grad_norm_ does: no host sync.
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/ops.h"

namespace loom::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  LOOM_CHECK(max_norm >= 0, ValueError, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  LOOM_CHECK(norm_type > 0, ValueError, "clip_grad_norm_: norm_type must be positive, got ", norm_type);
  NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  Tensor total;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    const Tensor g = p.grad().to(kFloat64).abs();
    Tensor part = inf ? g.max() : g.pow(norm_type).sum();
    if (!total.defined()) total = part;
    else total = inf ? maximum(total, part.to(total.device())) : total + part.to(total.device());
  }
  if (!total.defined()) return zeros({}, kFloat64);  // no gradients: nothing to clip
  if (total.is_cpu()) {
    double norm = total.item<double>();
    if (!inf) norm = std::pow(norm, 1.0 / norm_type);
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
      for (const Tensor& p : params)
        if (p.grad().defined()) p.mutable_grad().mul_(coef);
    }
    return scalar_tensor(norm, kFloat64);
  }
  const Tensor norm = inf ? total : total.pow(1.0 / norm_type);  // () float64, on the device
  const Tensor raw = max_norm / (norm + 1e-6);
  const Tensor coef = where(raw.lt(1.0), raw, ones_like(raw));  // as the CPU's `coef < 1` (a NaN norm: 1)
  for (const Tensor& p : params)
    if (p.grad().defined()) p.mutable_grad().mul_(coef.to(p.grad().dtype()));
  return norm;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  LOOM_CHECK(clip_value >= 0, ValueError, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params)
    if (p.grad().defined()) p.mutable_grad().clamp_(-clip_value, clip_value);
}

}  // namespace loom::optim
