#include "optim/optimizer.h"

#include <tuple>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"

namespace loom::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name) : name_(name) {
  add_param_group(std::move(params), lr);
}

void Optimizer::add_param_group(std::vector<Tensor> params, double lr) {
  LOOM_CHECK(lr >= 0, ValueError, name_, ": invalid learning rate ", lr);
  LOOM_CHECK(!params.empty(), ValueError, name_, ": got an empty parameter list");
  for (size_t i = 0; i < params.size(); ++i) {
    LOOM_CHECK(params[i].defined() && params[i].is_leaf() && params[i].requires_grad(), ValueError,
               name_, ": parameter ", i, " must be a leaf tensor that requires grad");
  }
  groups_.push_back({std::move(params), lr, lr});
}

void Optimizer::set_lr(double lr) {
  LOOM_CHECK(lr >= 0, ValueError, name_, ": invalid learning rate ", lr);
  for (ParamGroup& g : groups_) g.lr = lr;
}

void Optimizer::zero_grad(bool set_to_none) {
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

void Optimizer::load_state_dict(const StateDict& state) {
  auto get = [&](const std::string& key) -> const Tensor& {
    auto it = state.find(key);
    LOOM_CHECK(it != state.end(), ValueError, name_, ".load_state_dict: missing key '", key, "'");
    return it->second;
  };
  // Everything is read and checked before anything changes, so that a bad state dict
  // leaves the optimizer as it was.
  std::vector<std::pair<double, double>> lrs;  // (lr, initial_lr) per group
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    lrs.emplace_back(get("param_groups." + std::to_string(gi) + ".lr").item<double>(),
                     get("param_groups." + std::to_string(gi) + ".initial_lr").item<double>());
  const int64_t step_count = get("step").item<int64_t>();
  std::vector<const Tensor*> flat;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) flat.push_back(&p);
  std::map<size_t, std::map<std::string, Tensor>> new_state;
  for (const auto& [key, t] : state) {
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    LOOM_CHECK(dot != std::string::npos, ValueError, name_, ".load_state_dict: bad key '", key, "'");
    size_t i = 0;
    try {
      i = std::stoul(key.substr(6, dot - 6));
    } catch (const std::exception&) {
      throw ValueError(std::string(name_) + ".load_state_dict: bad key '" + key + "'");
    }
    LOOM_CHECK(i < flat.size(), ValueError, name_, ".load_state_dict: key '", key, "' names parameter ", i,
               " but the optimizer has ", flat.size());
    const Tensor& p = *flat[i];
    if (t.is_floating_point()) {
      // A buffer like the parameter: takes its dtype and device.
      LOOM_CHECK(t.sizes() == p.sizes(), ValueError, name_, ".load_state_dict: '", key, "' has shape ",
                 shape_str(t.sizes()), " but parameter ", i, " has shape ", shape_str(p.sizes()));
      new_state[i][key.substr(dot + 1)] = t.to(p.device(), p.dtype()).clone();
    } else {
      // A count (the int64 "step"): a scalar that stays on the CPU.
      LOOM_CHECK(t.numel() == 1, ValueError, name_, ".load_state_dict: '", key, "' has shape ",
                 shape_str(t.sizes()), " but a count must have one element");
      new_state[i][key.substr(dot + 1)] = t.to(kCPU, kInt64).reshape({}).clone();
    }
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) std::tie(groups_[gi].lr, groups_[gi].initial_lr) = lrs[gi];
  step_count_ = step_count;
  state_ = std::move(new_state);
}

}  // namespace loom::optim
