// nn::Module: the base of every layer and model, as torch.nn.Module.
//
// A module owns, in registration order, named parameters (tensors that require grad),
// buffers (state that is saved but not trained, e.g. running statistics) and child
// modules. Names compose with dots, as in PyTorch: "lstm.weight_ih_l0", "layers.0.fc.bias".
//
// Layers are used through handles (ModuleHolder): nn::Linear is a shared pointer to a
// LinearImpl, so that a model can keep a member `nn::Linear fc;` and register the same
// object as a child:
//
//   struct Net : nn::Module {
//     Net() : fc(register_module("fc", nn::Linear(4, 2))) {}
//     Tensor forward(const Tensor& x) { return fc(x); }
//     nn::Linear fc;
//   };
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/ordered_dict.h"
#include "core/tensor.h"
#include "core/trace.h"

namespace loom::nn {

// Named tensors in order (named_parameters), and a state dict: name -> tensor in
// insertion order, as PyTorch's OrderedDict.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = OrderedDict<Tensor>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  // type_name is what str() prints; empty means the class's own name (as PyTorch).
  explicit Module(std::string type_name = "") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ---- registration -------------------------------------------------------------------
  // Registers t (made a leaf that requires grad if requires_grad) and returns a handle to
  // the same tensor, to keep as a member.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <typename Holder>
  Holder register_module(const std::string& name, Holder holder) {
    add_child(name, holder.ptr());
    return holder;
  }
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> child);

  // ---- traversal ------------------------------------------------------------------------
  // A tensor or module reachable under several names (tied weights, a shared layer) is
  // listed once, under its first name, as in PyTorch; state_dict keeps every name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // This module and all below it, depth first, with dotted names ("" for this one). The
  // module must be owned by a shared_ptr (a handle, std::make_shared).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();

  // ---- modes, devices, dtypes ---------------------------------------------------------------
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer in place (handles stay valid), as module.to(device).
  virtual void to(Device device);
  // Casts floating-point parameters and buffers.
  virtual void to(DType dtype);
  void to(Device device, DType dtype) {
    to(device);
    to(dtype);
  }
  // set_to_none = true (PyTorch's default) drops the gradients; false zeroes them.
  void zero_grad(bool set_to_none = true);

  // ---- state ------------------------------------------------------------------------------------
  // Parameters and buffers by dotted name (tensors share memory with the module's), in
  // PyTorch's order: this module's parameters, then its buffers, then each child's state
  // in registration order, depth first ("bias", "mask", "fc.weight", "fc.bias", ...).
  StateDict state_dict() const;
  // Copies values into the module's tensors. strict: missing and unexpected keys are
  // errors. Shape mismatches are always errors. All problems are listed in one
  // ValueError.
  void load_state_dict(const StateDict& state, bool strict = true);

  // ---- printing -----------------------------------------------------------------------------------
  // The name given to the constructor, else the demangled class name without namespaces.
  const std::string& type_name() const;
  // The part inside the parentheses of this module's line, e.g. "in_features=4, ...".
  virtual std::string extra_repr() const { return ""; }
  std::string str() const;  // the module tree, as print(model)
  // Elements in parameters(): all of them, or those that require grad (trainable).
  int64_t parameter_count(bool trainable_only = false) const;

  // ---- forward hooks (as register_forward_hook) --------------------------------------------
  // hook(module, output) runs after every forward called through a handle (fc(x), and so
  // every layer a model or a Sequential calls), with its output: the tensor returned, or
  // the first of a returned pair or tuple, a result struct's `output` or `h` (an RNN's
  // RNNOutput, a cell's RNNState); undefined for other results. The id removes it again.
  using ForwardHook = std::function<void(Module& module, const Tensor& output)>;
  int64_t register_forward_hook(ForwardHook hook);
  void remove_forward_hook(int64_t id);
  bool has_forward_hooks() const { return !forward_hooks_.empty(); }
  void run_forward_hooks(const Tensor& output);

 protected:
  bool training_ = true;

 private:
  // Parameters (params) or buffers with dotted names, each tensor once (its first name).
  NamedTensors named_tensors(bool params, bool recurse) const;
  void collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const;
  // The tensors of state_dict() under prefix, not detached (load_state_dict writes them).
  void collect_state(const std::string& prefix, StateDict& out) const;

  mutable std::string type_name_;  // filled from typeid on first use when not given
  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<int64_t, ForwardHook>> forward_hooks_;
  int64_t next_hook_id_ = 0;
};

// The module tree (str()), then a line with the parameter counts, total and trainable:
// "Parameters: 58 total, 58 trainable".
std::ostream& operator<<(std::ostream& os, const Module& m);
// A count with thousands separators, "1,234,567" (print and summary).
std::string format_count(int64_t n);

namespace detail {
// The output a forward hook sees: the tensor, or the first element of a pair or tuple.
inline Tensor hook_output(const Tensor& t) { return t; }
template <typename A, typename B>
Tensor hook_output(const std::pair<A, B>& p) {
  return hook_output(p.first);
}
template <typename... Ts>
Tensor hook_output(const std::tuple<Ts...>& t) {
  if constexpr (sizeof...(Ts) > 0) return hook_output(std::get<0>(t));
  else return Tensor();
}
// A result struct's `output` (RNNOutput) or `h` (RNNState, a cell's state).
template <typename T>
Tensor hook_output(const T& result) {
  if constexpr (requires { Tensor(result.output); }) return result.output;
  else if constexpr (requires { Tensor(result.h); }) return result.h;
  else return Tensor();
}
}  // namespace detail

// A shared handle to a module implementation, as LibTorch's ModuleHolder:
// nn::Linear(4, 2) constructs a LinearImpl(4, 2); fc(x) calls fc->forward(x).
template <typename Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;
  // Constructs Impl() when it has a default constructor (nn::ReLU()); otherwise the
  // handle starts empty and must be assigned before use (a member set in a constructor).
  ModuleHolder() {
    if constexpr (std::is_default_constructible_v<Impl>) impl_ = std::make_shared<Impl>();
  }
  ModuleHolder(std::nullptr_t) {}  // NOLINT: explicitly empty
  template <typename First, typename... Rest,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<First>, ModuleHolder> &&
                                        !std::is_same_v<std::decay_t<First>, std::nullptr_t> &&
                                        !std::is_same_v<std::decay_t<First>, std::shared_ptr<Impl>>>>
  explicit ModuleHolder(First&& first, Rest&&... rest)
      : impl_(std::make_shared<Impl>(std::forward<First>(first), std::forward<Rest>(rest)...)) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT

  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }

  // forward, then the module's forward hooks (Module::register_forward_hook) on its result.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) const {
    Impl* m = checked();
    const trace::ModuleScope trace(static_cast<const Module*>(m));  // the module path of an export's messages
    using Result = decltype(m->forward(std::forward<Args>(args)...));
    if constexpr (std::is_void_v<Result> || std::is_reference_v<Result>) {
      return m->forward(std::forward<Args>(args)...);
    } else {
      Result out = m->forward(std::forward<Args>(args)...);
      if (m->has_forward_hooks()) m->run_forward_hooks(detail::hook_output(out));
      return out;
    }
  }

 private:
  Impl* checked() const;
  std::shared_ptr<Impl> impl_;
};

void throw_empty_holder();

template <typename Impl>
Impl* ModuleHolder<Impl>::checked() const {
  if (!impl_) throw_empty_holder();
  return impl_.get();
}

template <typename Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& m) {
  return os << *m;
}

}  // namespace loom::nn
