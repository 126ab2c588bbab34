// Optimizer base: parameter groups with a learning rate each, per-parameter state
// tensors, zero_grad, and a state_dict made of tensors (so that it can be saved in a
// safetensors checkpoint beside the model).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/ordered_dict.h"
#include "core/profiler.h"
#include "core/tensor.h"

namespace loom::optim {

// The same type as nn::StateDict: name -> tensor in insertion order.
using StateDict = OrderedDict<Tensor>;

// The largest step or epoch count that load_state_dict accepts: far beyond any real run,
// and far enough below INT64_MAX that counting on from it cannot overflow.
constexpr int64_t kMaxStateCount = int64_t(1) << 62;

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 1e-3;
  double initial_lr = 1e-3;  // set when the optimizer is made; schedulers start from it
};

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Adds a group with its own learning rate (as optimizer.add_param_group).
  void add_param_group(std::vector<Tensor> params, double lr);
  double lr() const { return groups_.front().lr; }
  void set_lr(double lr);  // every group
  const char* name() const { return name_; }

  // "param_groups.<g>.lr", "param_groups.<g>.initial_lr", "step" (calls of step()) and
  // "state.<i>.<buffer>" (i counts parameters across groups). The buffers are the live
  // state (as PyTorch's): serialize or clone them before stepping again.
  StateDict state_dict() const;
  // Treats the state as hostile input, checked as the constructor checks its arguments:
  // throws ValueError naming the key when an entry is missing, unexpected (a buffer this
  // optimizer does not keep), mis-shaped or out of range (a NaN or negative lr; a negative
  // or non-integral step; a negative running average of squares), and then changes nothing.
  void load_state_dict(const StateDict& state);

  // load_state_dict in two halves, for a loader that restores several objects all or
  // nothing (optim/checkpoint.cpp): check_state_dict reads and checks the whole state and
  // returns it, changing nothing; apply_state_dict installs it and cannot fail.
  struct LoadedState {
    std::vector<std::pair<double, double>> lrs;  // (lr, initial_lr) per group
    int64_t step_count = 0;
    std::map<size_t, std::map<std::string, Tensor>> buffers;  // per parameter
  };
  LoadedState check_state_dict(const StateDict& state) const;
  void apply_state_dict(LoadedState loaded) noexcept;

 protected:
  // The state tensor `key` of parameter i (created as zeros like p on first use).
  Tensor& state(size_t i, const std::string& key, const Tensor& like);
  bool has_state(size_t i, const std::string& key) const;
  // Counts one more update of parameter i and returns the count: PyTorch's per-parameter
  // state["step"] (an int64 scalar on the CPU), which a step that finds no gradient for
  // the parameter does not advance.
  int64_t advance_step(size_t i);
  // Calls fn(i, p) for every parameter with a gradient; i is its global index.
  template <typename F>
  void for_each_param(F&& fn) {
    size_t i = 0;
    for (ParamGroup& g : groups_)
      for (Tensor& p : g.params) {
        if (p.grad().defined()) fn(i, p, g);
        ++i;
      }
  }
  // The per-parameter buffers the optimizer keeps besides its "step" count, which are all
  // that load_state_dict accepts; a non_negative one (a running average of squares) must
  // hold no negative or NaN value. An optimizer that keeps buffers lists them here.
  struct StateBuffer {
    const char* name;
    bool non_negative;
  };
  virtual std::vector<StateBuffer> state_buffers() const { return {}; }
  // The profiler's range around a step() ("Optimizer.step#Adam.step", as PyTorch names it):
  // every step() opens one first.
  profiler::ScopedEvent step_event() const { return {step_event_name_, profiler::EventKind::Annotation}; }
  // Checks p and its gradient before an update: same shape, device and dtype.
  void check_param(const Tensor& p) const;
  int64_t step_count_ = 0;

 private:
  const char* name_;
  const char* step_event_name_;       // "Optimizer.step#<name>.step"
  const char* zero_grad_event_name_;  // "Optimizer.zero_grad#<name>.zero_grad"
  std::vector<ParamGroup> groups_;
  std::map<size_t, std::map<std::string, Tensor>> state_;
};

}  // namespace loom::optim
