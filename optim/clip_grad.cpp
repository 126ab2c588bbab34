// Gradient clipping (optim/clip_grad.h). The total norm is one fused multi-tensor norm per
// device (fused::multi_tensor_norm: one pass over the gradients, no temporaries, a fixed
// summation order), a () float64 tensor on the gradients' device. On the CPU it is then read
// (at no cost) and the gradients are scaled only when clipped; on a GPU the clip coefficient
// stays on the device and every gradient is multiplied by it (by 1 when not clipped, which
// changes nothing), as PyTorch's clip_grad_norm_ does: no host sync.
#include "optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/functions/fused_updates.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/ops.h"

namespace loom::optim {
namespace {

// The joint norm of grads, all on one device: () float64 there.
Tensor norm_on_device(const std::vector<Tensor>& grads, double norm_type) {
  Tensor out = empty({}, TensorOptions(kFloat64).device(grads.front().device()));
  fused::multi_tensor_norm(grads, norm_type, out);
  return out;
}

// The joint norm of the gradients of params: one fused norm per device, and the devices'
// norms combined on the first one (as PyTorch's per-device grouping does).
Tensor total_norm(const std::vector<Tensor>& params, double norm_type) {
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;  // in order of first appearance
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    const Tensor& g = p.grad();
    auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& d) { return d.first == g.device(); });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {g.device(), {}});
    it->second.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  if (by_device.empty()) return Tensor();
  if (by_device.size() == 1) return norm_on_device(by_device.front().second, norm_type);
  std::vector<Tensor> norms;  // one per device, on the first
  for (const auto& [device, grads] : by_device)
    norms.push_back(norm_on_device(grads, norm_type).to(by_device.front().first));
  return norm_on_device(norms, norm_type);  // the norm of the per-device norms is the joint one
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  LOOM_CHECK(max_norm >= 0, ValueError, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  LOOM_CHECK(norm_type > 0, ValueError, "clip_grad_norm_: norm_type must be positive, got ", norm_type);
  NoGradGuard no_grad;
  const Tensor norm = total_norm(params, norm_type);
  if (!norm.defined()) return zeros({}, kFloat64);  // no gradients: nothing to clip
  if (norm.is_cpu()) {
    const double coef = max_norm / (norm.item<double>() + 1e-6);
    if (coef < 1) {
      for (const Tensor& p : params)
        if (p.grad().defined()) p.mutable_grad().mul_(coef);
    }
    return norm;
  }
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
