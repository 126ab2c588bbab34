#include "nn/module.h"

#include <algorithm>
#include <sstream>

#include "autograd/grad_mode.h"

namespace loom::nn {

void throw_empty_holder() {
  throw ValueError("nn: the module handle is empty (default-constructed); assign a module first");
}

namespace {
void check_name(const std::string& name, const std::string& type, const char* what) {
  LOOM_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, type, ".", what,
             ": name '", name, "' must be non-empty and contain no '.'");
}

template <typename Entries>
bool has_name(const Entries& entries, const std::string& name) {
  return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, type_name_, "register_parameter");
  LOOM_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
             ValueError, type_name_, ".register_parameter: '", name, "' is already registered");
  LOOM_CHECK(t.defined(), ValueError, type_name_, ".register_parameter: '", name, "' is undefined");
  if (!t.is_leaf()) t = t.detach();
  if (requires_grad) t.requires_grad_(true);
  parameters_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, type_name_, "register_buffer");
  LOOM_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
             ValueError, type_name_, ".register_buffer: '", name, "' is already registered");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_name(name, type_name_, "register_module");
  LOOM_CHECK(child != nullptr, ValueError, type_name_, ".register_module: '", name, "' is empty");
  LOOM_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
             ValueError, type_name_, ".register_module: '", name, "' is already registered");
  children_.emplace_back(name, std::move(child));
}

void Module::collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const {
  for (const auto& [name, t] : params ? parameters_ : buffers_)
    if (t.defined()) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", true, params, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", recurse, true, out);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", recurse, false, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out{{"", shared_from_this()}};
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto* list : {&parameters_, &buffers_})
    for (auto& [name, t] : *list) {
      if (!t.defined() || t.device() == device) continue;
      t.set_data(t.detach().to(device));
      if (t.grad().defined()) t.mutable_grad() = t.grad().to(device);
    }
  for (auto& [name, child] : children_) child->to(device);
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (auto* list : {&parameters_, &buffers_})
    for (auto& [name, t] : *list) {
      if (!t.defined() || !t.is_floating_point() || t.dtype() == dtype) continue;
      t.set_data(t.detach().to(dtype));
      if (t.grad().defined()) t.mutable_grad() = t.grad().to(dtype);
    }
  for (auto& [name, child] : children_) child->to(dtype);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad() = Tensor();
    } else {
      NoGradGuard no_grad;
      p.mutable_grad().zero_();
    }
  }
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out[name] = t.detach();
  for (auto& [name, t] : named_buffers()) out[name] = t.detach();
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  NamedTensors own = named_parameters();
  NamedTensors bufs = named_buffers();
  own.insert(own.end(), bufs.begin(), bufs.end());
  std::vector<std::string> missing, unexpected, mismatched;
  for (auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) missing.push_back(name);
    else if (it->second.sizes() != t.sizes())
      mismatched.push_back(name + ": checkpoint " + shape_str(it->second.sizes()) + " vs model " +
                           shape_str(t.sizes()));
  }
  for (auto& [name, t] : state)
    if (!has_name(own, name)) unexpected.push_back(name);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::ostringstream problems;
  if (strict && !missing.empty()) problems << "\n  missing keys: " << join(missing);
  if (strict && !unexpected.empty()) problems << "\n  unexpected keys: " << join(unexpected);
  if (!mismatched.empty()) problems << "\n  shape mismatches: " << join(mismatched);
  LOOM_CHECK(problems.str().empty(), ValueError, type_name_, ".load_state_dict: the state does not fit",
             problems.str());
  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    auto it = state.find(name);
    if (it != state.end()) t.copy_(it->second);
  }
}

void Module::print(std::ostream& os, int indent) const {
  os << type_name_ << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (const auto& [name, child] : children_) {
      os << std::string(size_t(indent + 2), ' ') << "(" << name << "): ";
      child->print(os, indent + 2);
      os << "\n";
    }
    os << std::string(size_t(indent), ' ');
  }
  os << ")";
}

std::string Module::str() const {
  std::ostringstream os;
  print(os, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.str(); }

}  // namespace loom::nn
