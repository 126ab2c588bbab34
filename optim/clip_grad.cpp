#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"

namespace loom::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  LOOM_CHECK(max_norm >= 0, ValueError, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  LOOM_CHECK(norm_type > 0, ValueError, "clip_grad_norm_: norm_type must be positive, got ", norm_type);
  NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  double total = 0;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    Tensor g = p.grad().to(kFloat64);
    if (inf) total = std::max(total, g.abs().max().item<double>());
    else total += g.abs().pow(norm_type).sum().item<double>();
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1) {
    for (const Tensor& p : params)
      if (p.grad().defined()) p.mutable_grad().mul_(coef);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  LOOM_CHECK(clip_value >= 0, ValueError, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params)
    if (p.grad().defined()) p.mutable_grad().clamp_(-clip_value, clip_value);
}

}  // namespace loom::optim
