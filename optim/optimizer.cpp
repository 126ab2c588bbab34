#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>
#include <tuple>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "optim/state_entry.h"

namespace loom::optim {

void ParamGroup::set_lr(double value) {
  lr = value;
  if (device_lr.defined() && device_lr_value != value) {
    NoGradGuard no_grad;
    device_lr.fill_(value);  // a fill on the device: queued, nothing waits
    device_lr_value = value;
  }
}

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : name_(name),
      step_event_name_(profiler::intern(std::string("Optimizer.step#") + name + ".step")),
      zero_grad_event_name_(profiler::intern(std::string("Optimizer.zero_grad#") + name + ".zero_grad")) {
  add_param_group(std::move(params), lr);
}

void Optimizer::add_param_group(std::vector<Tensor> params, double lr) {
  LOOM_CHECK(lr >= 0, ValueError, name_, ": invalid learning rate ", lr);
  LOOM_CHECK(!params.empty(), ValueError, name_, ": got an empty parameter list");
  for (size_t i = 0; i < params.size(); ++i) {
    LOOM_CHECK(params[i].defined() && params[i].is_leaf() && params[i].requires_grad(), ValueError,
               name_, ": parameter ", i, " must be a leaf tensor that requires grad");
  }
  ParamGroup group;
  group.params = std::move(params);
  group.lr = group.initial_lr = lr;
  groups_.push_back(std::move(group));
}

void Optimizer::set_lr(double lr) {
  LOOM_CHECK(lr >= 0, ValueError, name_, ": invalid learning rate ", lr);
  for (ParamGroup& g : groups_) g.set_lr(lr);
}

void Optimizer::step_if_finite(const Tensor& found_inf) {
  if (!capturable_) {
    if (found_inf.item<float>() == 0.0f) step();  // waits for the GPU
    return;
  }
  found_inf_ = found_inf;  // read by fused_step: the device decides
  struct Clear {
    Tensor& t;
    ~Clear() { t = Tensor(); }
  } clear{found_inf_};
  step();
}

const Tensor& Optimizer::device_lr(ParamGroup& group, Device device) {
  if (!group.device_lr.defined() || group.device_lr.device() != device) {
    group.device_lr = full({}, group.lr, TensorOptions(kFloat64).device(device));
    group.device_lr_value = group.lr;
  }
  group.set_lr(group.lr);  // an lr assigned directly since: written to the device now
  return group.device_lr;
}

const Tensor& Optimizer::device_step(size_t i, const Tensor& p) {
  Tensor& t = state_[i]["step"];
  const TensorOptions options = TensorOptions(kFloat64).device(p.device());
  if (!t.defined()) {
    t = zeros({}, options);
  } else if (t.device() != p.device() || t.dtype() != kFloat64) {
    // A count an eager step or a checkpoint left (an int64 on the CPU): filled in, once.
    t = t.is_cpu() ? full({}, t.item<double>(), options) : t.to(kFloat64).to(p.device());
  }
  return t;
}

void Optimizer::zero_grad(bool set_to_none) {
  const profiler::ScopedEvent event(zero_grad_event_name_, profiler::EventKind::Annotation);
  for (ParamGroup& g : groups_) loom::zero_grad(g.params, set_to_none);
}

Tensor& Optimizer::state(size_t i, const std::string& key, const Tensor& like) {
  Tensor& t = state_[i][key];
  if (!t.defined()) t = zeros(like.sizes(), like.options());
  return t;
}

bool Optimizer::has_state(size_t i, const std::string& key) const {
  auto it = state_.find(i);
  return it != state_.end() && it->second.count(key);
}

int64_t Optimizer::advance_step(size_t i) {
  Tensor& t = state_[i]["step"];
  if (!t.defined()) t = scalar_tensor(int64_t(0), kInt64);
  return ++*t.data_ptr<int64_t>();
}

void Optimizer::check_param(const Tensor& p) const {
  const Tensor& g = p.grad();
  LOOM_CHECK(g.sizes() == p.sizes() && g.device() == p.device() && g.dtype() == p.dtype(), ValueError,
             name_, ": gradient ", shape_str(g.sizes()), " ", dtype_name(g.dtype()), " on ", g.device(),
             " does not match its parameter ", shape_str(p.sizes()), " ", dtype_name(p.dtype()), " on ",
             p.device());
  LOOM_CHECK(p.is_contiguous() && g.is_contiguous(), ValueError, name_,
             ": parameters and gradients must be contiguous");
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    out["param_groups." + std::to_string(gi) + ".lr"] = scalar_tensor(groups_[gi].lr, kFloat64);
    out["param_groups." + std::to_string(gi) + ".initial_lr"] = scalar_tensor(groups_[gi].initial_lr, kFloat64);
  }
  out["step"] = scalar_tensor(step_count_, kInt64);
  for (const auto& [i, buffers] : state_)
    for (const auto& [key, t] : buffers) out["state." + std::to_string(i) + "." + key] = t.detach();
  return out;
}

namespace {

// A string of decimal digits without a leading zero (as std::to_string writes an index).
bool is_index(std::string_view s) {
  return !s.empty() && s.size() < 19 && (s == "0" || s[0] != '0') &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Optimizer::LoadedState Optimizer::check_state_dict(const StateDict& state) const {
  const std::string who = std::string(name_) + ".load_state_dict";
  auto get = [&](const std::string& key) -> const Tensor& {
    auto it = state.find(key);
    LOOM_CHECK(it != state.end(), ValueError, who, ": missing key '", key, "'");
    LOOM_CHECK(it->second.defined() && it->second.numel() == 1 && it->second.dtype() != kBool, ValueError, who, ": '",
               key, "' must be one number, got ", describe(it->second));
    return it->second;
  };
  // As add_param_group and set_lr check a learning rate (which also refuses NaN), and
  // finite: an infinite one turns every parameter it updates into inf or NaN.
  auto learning_rate = [&](const std::string& key) {
    const double lr = get(key).item<double>();
    LOOM_CHECK(lr >= 0 && std::isfinite(lr), ValueError, who, ": '", key,
               "' must be a finite non-negative learning rate, got ", lr);
    return lr;
  };
  // A count of steps: a non-negative integer, stored as int64 (Loom) or float (PyTorch).
  auto count = [&](const std::string& key, const Tensor& t) -> int64_t {
    LOOM_CHECK(t.defined() && t.numel() == 1 && t.dtype() != kBool, ValueError, who, ": '", key,
               "' must be one count, got ", describe(t));
    if (!t.is_floating_point()) {
      const int64_t v = t.item<int64_t>();
      LOOM_CHECK(v >= 0, ValueError, who, ": '", key, "' must be a non-negative count, got ", v);
      LOOM_CHECK(v <= kMaxStateCount, ValueError, who, ": '", key, "' must be a count of at most 2^62, got ", v);
      return v;
    }
    const double v = t.item<double>();
    LOOM_CHECK(v >= 0 && std::floor(v) == v, ValueError, who, ": '", key, "' must be a non-negative whole count, got ",
               v);
    LOOM_CHECK(v <= double(kMaxStateCount), ValueError, who, ": '", key, "' must be a count of at most 2^62, got ", v);
    return int64_t(v);
  };
  // Everything is read and checked here; nothing changes until apply_state_dict.
  LoadedState out;
  std::set<std::string> expected{"step"};
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string group = "param_groups." + std::to_string(gi) + ".";
    out.lrs.emplace_back(learning_rate(group + "lr"), learning_rate(group + "initial_lr"));
    expected.insert({group + "lr", group + "initial_lr"});
  }
  out.step_count = count("step", get("step"));
  std::vector<const Tensor*> flat;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) flat.push_back(&p);
  const std::vector<StateBuffer> known = state_buffers();
  std::string unexpected;
  for (const auto& [key, t] : state) {
    if (expected.count(key)) continue;
    const size_t dot = key.rfind("state.", 0) == 0 ? key.find('.', 6) : std::string::npos;
    if (dot == std::string::npos || !is_index(std::string_view(key).substr(6, dot - 6))) {
      unexpected += (unexpected.empty() ? "'" : ", '") + key + "'";
      continue;
    }
    const size_t i = std::stoul(key.substr(6, dot - 6));
    LOOM_CHECK(i < flat.size(), ValueError, who, ": key '", key, "' names parameter ", i, " but the optimizer has ",
               flat.size());
    const Tensor& p = *flat[i];
    const std::string buffer = key.substr(dot + 1);
    if (buffer == "step") {  // the parameter's own count, an int64 scalar on the CPU
      out.buffers[i][buffer] = scalar_tensor(count(key, t), kInt64);
      continue;
    }
    const auto spec = std::find_if(known.begin(), known.end(), [&](const StateBuffer& b) { return buffer == b.name; });
    if (spec == known.end()) {
      unexpected += (unexpected.empty() ? "'" : ", '") + key + "'";
      continue;
    }
    // A buffer like the parameter: takes its dtype and device.
    LOOM_CHECK(t.defined() && t.is_floating_point(), ValueError, who, ": '", key,
               "' must be a floating-point buffer, got ", describe(t));
    LOOM_CHECK(t.sizes() == p.sizes(), ValueError, who, ": '", key, "' has shape ", shape_str(t.sizes()),
               " but parameter ", i, " has shape ", shape_str(p.sizes()));
    Tensor value = t.to(p.device(), p.dtype()).clone();
    // A step never stores inf or NaN in a buffer (GradScaler skips the steps whose gradients
    // hold them); NaN >= 0 is false, so a NaN counts as negative too.
    LOOM_CHECK(!spec->non_negative || value.ge(0).to(kInt64).sum().item<int64_t>() == value.numel(), ValueError, who,
               ": '", key, "' holds a negative or NaN value (a running average of squares is never negative)");
    LOOM_CHECK(value.isfinite().all().item<bool>(), ValueError, who, ": '", key,
               "' holds an infinite or NaN value (a step never stores one)");
    out.buffers[i][buffer] = std::move(value);
  }
  LOOM_CHECK(unexpected.empty(), ValueError, who, ": unexpected keys ", unexpected, " (", name_, " keeps no such state)");
  return out;
}

void Optimizer::apply_state_dict(LoadedState loaded) noexcept {
  // (A capturable group's device_lr follows at its next step: a fill here could throw.)
  for (size_t gi = 0; gi < groups_.size(); ++gi) std::tie(groups_[gi].lr, groups_[gi].initial_lr) = loaded.lrs[gi];
  step_count_ = loaded.step_count;
  state_ = std::move(loaded.buffers);
}

void Optimizer::load_state_dict(const StateDict& state) { apply_state_dict(check_state_dict(state)); }

}  // namespace loom::optim
