#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"

namespace loom::nn {

void throw_empty_holder() {
  throw ValueError("nn: the module handle is empty (default-constructed); assign a module first");
}

namespace {
// m.type_name() only on failure: during a base class's constructor typeid names the base.
void check_name(const std::string& name, const Module& m, const char* what) {
  LOOM_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, m.type_name(), ".", what,
             ": name '", name, "' must be non-empty and contain no '.'");
}

template <typename Entries>
bool has_name(const Entries& entries, const std::string& name) {
  return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, *this, "register_parameter");
  LOOM_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
             ValueError, type_name(), ".register_parameter: '", name, "' is already registered");
  LOOM_CHECK(t.defined(), ValueError, type_name(), ".register_parameter: '", name, "' is undefined");
  if (!t.is_leaf()) t = t.detach();
  if (requires_grad) t.requires_grad_(true);
  parameters_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, *this, "register_buffer");
  LOOM_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
             ValueError, type_name(), ".register_buffer: '", name, "' is already registered");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_name(name, *this, "register_module");
  LOOM_CHECK(child != nullptr, ValueError, type_name(), ".register_module: '", name, "' is empty");
  LOOM_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
             ValueError, type_name(), ".register_module: '", name, "' is already registered");
  children_.emplace_back(name, std::move(child));
}

void Module::collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const {
  for (const auto& [name, t] : params ? parameters_ : buffers_)
    if (t.defined()) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", true, params, out);
}

NamedTensors Module::named_tensors(bool params, bool recurse) const {
  NamedTensors all;
  collect("", recurse, params, all);
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& entry : all)
    if (seen.insert(entry.second.impl()).second) out.push_back(std::move(entry));
  return out;
}

NamedTensors Module::named_parameters(bool recurse) const { return named_tensors(true, recurse); }

NamedTensors Module::named_buffers(bool recurse) const { return named_tensors(false, recurse); }

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
  std::shared_ptr<Module> self = weak_from_this().lock();
  LOOM_CHECK(self != nullptr, ValueError, type_name(),
             ".named_modules: the module must be owned by a std::shared_ptr (create it with "
             "std::make_shared or hold it in a module handle)");
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out{{"", self}};
  std::unordered_set<const Module*> seen{this};
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules())
      if (seen.insert(m.get()).second) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
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

void Module::zero_grad(bool set_to_none) { loom::zero_grad(parameters(), set_to_none); }

// As PyTorch's Module._save_to_state_dict and state_dict: own parameters, own buffers,
// then the children, each under its dotted prefix.
void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const NamedTensors* list : {&parameters_, &buffers_})
    for (const auto& [name, t] : *list)
      if (t.defined()) out[prefix + name] = t;
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  for (auto& [name, t] : out) t = t.detach();
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own;
  collect_state("", own);
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) missing.push_back(name);
    else if (it->second.sizes() != t.sizes())
      mismatched.push_back(name + ": checkpoint " + shape_str(it->second.sizes()) + " vs model " +
                           shape_str(t.sizes()));
  }
  for (const auto& [name, t] : state)
    if (!own.contains(name)) unexpected.push_back(name);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::ostringstream problems;
  if (strict && !missing.empty()) problems << "\n  missing keys: " << join(missing);
  if (strict && !unexpected.empty()) problems << "\n  unexpected keys: " << join(unexpected);
  if (!mismatched.empty()) problems << "\n  shape mismatches: " << join(mismatched);
  LOOM_CHECK(problems.str().empty(), ValueError, type_name(), ".load_state_dict: the state does not fit",
             problems.str());
  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    auto it = state.find(name);
    if (it != state.end()) t.copy_(it->second);
  }
}

const std::string& Module::type_name() const {
  if (type_name_.empty()) {
    const char* mangled = typeid(*this).name();
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = status == 0 ? demangled : mangled;
    std::free(demangled);
    // "ns::(anonymous namespace)::Net" -> "Net" (the last "::" outside template arguments)
    const size_t colons = name.substr(0, name.find('<')).rfind("::");
    type_name_ = colons == std::string::npos ? name : name.substr(colons + 2);
  }
  return type_name_;
}

// As PyTorch's Module.__repr__: a one-line extra_repr stays on the module's line; with
// children (or several extra lines) each goes on its own line, indented by two spaces.
std::string Module::str() const {
  std::vector<std::string> lines;
  std::istringstream extra(extra_repr());
  for (std::string line; std::getline(extra, line);) lines.push_back(line);
  const size_t extra_lines = lines.size();
  for (const auto& [name, child] : children_) {
    std::string child_str = child->str();
    for (size_t at = child_str.find('\n'); at != std::string::npos; at = child_str.find('\n', at + 1))
      child_str.insert(at + 1, "  ");
    lines.push_back("(" + name + "): " + child_str);
  }
  std::string s = type_name() + "(";
  if (extra_lines == 1 && children_.empty()) {
    s += lines[0];
  } else if (!lines.empty()) {
    for (const std::string& line : lines) s += "\n  " + line;
    s += "\n";
  }
  return s + ")";
}

int64_t Module::parameter_count(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

int64_t Module::register_forward_hook(ForwardHook hook) {
  LOOM_CHECK(hook != nullptr, ValueError, type_name(), ".register_forward_hook: the hook is empty");
  forward_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_forward_hook(int64_t id) {
  std::erase_if(forward_hooks_, [id](const auto& entry) { return entry.first == id; });
}

void Module::run_forward_hooks(const Tensor& output) {
  // A copy: a hook may remove itself (or others) while running.
  const auto hooks = forward_hooks_;
  for (const auto& [id, hook] : hooks) hook(*this, output);
}

std::string format_count(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  return os << m.str() << "\nParameters: " << format_count(m.parameter_count()) << " total, "
            << format_count(m.parameter_count(true)) << " trainable";
}

}  // namespace loom::nn
