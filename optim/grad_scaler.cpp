// amp::GradScaler (Note [gradient scaling]).
#include "optim/grad_scaler.h"

#include <cfloat>
#include <cmath>
#include <set>

#include "autograd/functions/fused_updates.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "optim/state_entry.h"

namespace loom::amp {
namespace {

using optim::state_entry;

constexpr const char* kWho = "GradScaler";

void check_options(const GradScalerOptions& o) {
  LOOM_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0 && o.init_scale <= FLT_MAX, ValueError, kWho,
             ": init_scale must be a positive finite number (that a float32 holds), got ", o.init_scale);
  LOOM_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1, ValueError, kWho,
             ": growth_factor must be greater than 1, got ", o.growth_factor);
  LOOM_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, ValueError, kWho,
             ": backoff_factor must be in (0, 1), got ", o.backoff_factor);
  LOOM_CHECK(o.growth_interval >= 1 && o.growth_interval <= INT32_MAX, ValueError, kWho,
             ": growth_interval must be in [1, 2^31), got ", o.growth_interval);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) { check_options(options_); }

void GradScaler::lazy_init(Device device) {
  if (scale_.defined()) return;
  scale_ = full({1}, options_.init_scale, TensorOptions(kFloat32).device(device));
  growth_tracker_ = full({1}, init_growth_tracker_, TensorOptions(kInt32).device(device));
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!options_.enabled) return loss;
  LOOM_CHECK(loss.defined() && loss.is_floating_point(), DTypeError, kWho,
             ".scale: expected a floating-point loss, got ",
             loss.defined() ? dtype_name(loss.dtype()) : "an undefined tensor");
  lazy_init(loss.device());
  LOOM_CHECK(loss.device() == scale_.device(), DeviceError, kWho, ".scale: the loss is on ", loss.device(),
             " but the scale on ", scale_.device(), " (one scaler per device)");
  return loss * scale_;  // (1,) float32: a float16 / bfloat16 loss becomes float32
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  OptimizerState& s = per_optimizer_[&optimizer];
  LOOM_CHECK(s.stage != Stage::Unscaled, ValueError, kWho,
             ".unscale_: already called on this optimizer since the last update()");
  LOOM_CHECK(s.stage != Stage::Stepped, ValueError, kWho, ".unscale_: called after step(); call update() first");
  LOOM_CHECK(scale_.defined(), ValueError, kWho, ".unscale_: no loss was scaled (call scale(loss) first)");
  // Check every gradient before changing any, so an error leaves them all as they were.
  std::vector<const Tensor*> params;
  for (const optim::ParamGroup& g : optimizer.param_groups())
    for (const Tensor& p : g.params) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      LOOM_CHECK(grad.dtype() != kFloat16, DTypeError, kWho, ".unscale_: a float16 gradient (parameter of shape ",
                 shape_str(p.sizes()), "): keep the parameters in float32 and let autocast cast them");
      LOOM_CHECK(grad.device() == scale_.device(), DeviceError, kWho, ".unscale_: a gradient on ", grad.device(),
                 " but the scale on ", scale_.device());
      params.push_back(&p);
    }
  NoGradGuard no_grad;
  // 1 / scale in double, then float32, as PyTorch.
  const Tensor inv_scale = (1.0 / scale_.to(kFloat64)).to(kFloat32);
  Tensor found_inf = zeros({1}, scale_.options());
  std::vector<Tensor> grads;
  for (const Tensor* p : params) {
    Tensor& grad = p->mutable_grad();
    if (!grad.is_contiguous()) grad = grad.contiguous();  // the kernel runs over dense memory
    grads.push_back(grad);
  }
  fused::unscale_grads(grads, found_inf, inv_scale);  // on a GPU one launch per dtype
  s.found_inf = found_inf;
  s.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  OptimizerState& s = per_optimizer_[&optimizer];
  LOOM_CHECK(s.stage != Stage::Stepped, ValueError, kWho, ".step: already called since the last update()");
  if (s.stage == Stage::Ready) unscale_(optimizer);
  s.stage = Stage::Stepped;
  if (optimizer.capturable()) {  // the device skips the step if found_inf: nothing waits
    optimizer.step_if_finite(s.found_inf);
    return true;
  }
  const bool skip = s.found_inf.item<float>() != 0.0f;  // waits for the GPU
  if (!skip) optimizer.step();
  return !skip;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  NoGradGuard no_grad;
  if (new_scale) {
    LOOM_CHECK(std::isfinite(*new_scale) && *new_scale > 0, ValueError, kWho,
               ".update: new_scale must be a positive finite number, got ", *new_scale);
    LOOM_CHECK(scale_.defined(), ValueError, kWho, ".update: no loss was scaled yet");
    scale_.fill_(*new_scale);
  } else {
    Tensor found;
    for (auto& [opt, s] : per_optimizer_)
      if (s.found_inf.defined()) found = found.defined() ? found + s.found_inf : s.found_inf;
    LOOM_CHECK(found.defined(), ValueError, kWho, ".update: no inf checks were recorded since the last update() "
               "(call step() or unscale_() first)");
    fused::update_scale(scale_, growth_tracker_, found.contiguous(), options_.growth_factor,
                          options_.backoff_factor, options_.growth_interval);
  }
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? double(scale_.item<float>()) : options_.init_scale;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!options_.enabled) return 0;
  return growth_tracker_.defined() ? int64_t(growth_tracker_.item<int32_t>()) : init_growth_tracker_;
}

optim::StateDict GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  auto real = [](double v) { return scalar_tensor(v, kFloat64); };
  auto integer = [](int64_t v) { return scalar_tensor(v, kInt64); };
  return {{"scale", real(get_scale())},
          {"growth_factor", real(options_.growth_factor)},
          {"backoff_factor", real(options_.backoff_factor)},
          {"growth_interval", integer(options_.growth_interval)},
          {"_growth_tracker", integer(get_growth_tracker())}};
}

GradScaler::LoadedState GradScaler::check_state_dict(const optim::StateDict& state) const {
  LoadedState loaded{options_, 0};
  if (!options_.enabled) return loaded;
  LOOM_CHECK(!state.empty(), ValueError, kWho,
             ".load_state_dict: the state dict is empty (saved from a disabled GradScaler?)");
  const std::set<std::string> known = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                                       "_growth_tracker"};
  for (const auto& [key, value] : state)
    LOOM_CHECK(known.count(key), ValueError, kWho, ".load_state_dict: unexpected key '", key, "'");
  GradScalerOptions& o = loaded.options;
  o.init_scale = state_entry(state, "scale", kFloat64, kWho).item<double>();
  // The scale lives in a float32: finite there too.
  LOOM_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0 && o.init_scale <= FLT_MAX, ValueError, kWho,
             ".load_state_dict: 'scale' must be a positive finite float32 number, got ", o.init_scale);
  o.growth_factor = state_entry(state, "growth_factor", kFloat64, kWho).item<double>();
  o.backoff_factor = state_entry(state, "backoff_factor", kFloat64, kWho).item<double>();
  o.growth_interval = state_entry(state, "growth_interval", kInt64, kWho).item<int64_t>();
  try {
    check_options(o);
  } catch (const ValueError& e) {
    throw ValueError(std::string(kWho) + ".load_state_dict: " + e.what());
  }
  loaded.growth_tracker = state_entry(state, "_growth_tracker", kInt64, kWho).item<int64_t>();
  LOOM_CHECK(loaded.growth_tracker >= 0 && loaded.growth_tracker < o.growth_interval, ValueError, kWho,
             ".load_state_dict: '_growth_tracker' must be in [0, growth_interval = ", o.growth_interval, "), got ",
             loaded.growth_tracker);
  return loaded;
}

void GradScaler::apply_state_dict(const LoadedState& loaded) noexcept {
  if (!options_.enabled) return;
  options_ = loaded.options;
  init_growth_tracker_ = loaded.growth_tracker;
  if (scale_.defined()) {  // fills of one-element tensors on their device
    NoGradGuard no_grad;
    scale_.fill_(loaded.options.init_scale);
    growth_tracker_.fill_(loaded.growth_tracker);
  }
}

void GradScaler::load_state_dict(const optim::StateDict& state) { apply_state_dict(check_state_dict(state)); }

}  // namespace loom::amp
