// Optimizer base: parameter groups with a learning rate each, per-parameter state
// tensors, zero_grad, and a state_dict made of tensors (so that it can be saved in a
// safetensors checkpoint beside the model).
//
// Note [capturable optimizers]
// An optimizer's step reads numbers the host keeps: each group's learning rate and, for
// Adam, each parameter's count of updates (the bias corrections). That is fine for an eager
// step, which hands them to the update's kernels each time. A step captured once and replayed
// (a CUDA graph) would replay the numbers of the capture. With `capturable(true)` (PyTorch's
// option, for SGD, Adam, AdamW and RMSprop) they live on the parameters' device instead: each
// group's learning rate as a () float64 tensor (ParamGroup::device_lr) that ParamGroup::set_lr
// — what the schedulers call — writes there without waiting, and Adam's counts as () float64
// state tensors that the update advances there. The update's kernels read them and compute
// the same update_math (kernels/math/optim_math.h) the host computes for an eager step: on the CPU
// the two steps agree bit for bit; on a GPU, where Adam's bias corrections come from the
// device's pow, to within its rounding. A capturable step also takes GradScaler's inf check
// on the device (step_if_finite): a step whose gradients were not finite changes nothing,
// counts included, without the host reading the flag. Nothing in a capturable step waits
// for the GPU. The counts are saved in state_dict() as PyTorch saves a capturable
// optimizer's (float tensors); a checkpoint of either kind loads into either kind. Momentum
// or betas a scheduler cycles (OneCycleLR) remain host values read at each step.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions/fused_updates.h"
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
  // A capturable optimizer's copy of lr on the parameters' device (undefined until its first
  // step, and for an eager optimizer): () float64 (Note [capturable optimizers]).
  Tensor device_lr;
  double device_lr_value = 0;  // what device_lr holds

  // lr = value, and the device copy written too (queued: nothing waits). Schedulers call
  // it; a step also writes lr to the device copy when it was assigned directly.
  void set_lr(double value);
};

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // The step GradScaler takes: none when found_inf ((1,) float32 on the parameters' device)
  // is nonzero. A capturable optimizer decides on the device, without waiting; another one
  // reads found_inf on the host first (on a GPU that waits for it).
  void step_if_finite(const Tensor& found_inf);
  bool capturable() const { return capturable_; }
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
  // The per-parameter buffers the optimizer keeps besides its "step" count, which are all
  // that load_state_dict accepts; a non_negative one (a running average of squares) must
  // hold no negative or NaN value. An optimizer that keeps buffers lists them here.
  struct StateBuffer {
    const char* name;
    bool non_negative;
  };
  virtual std::vector<StateBuffer> state_buffers() const { return {}; }
  // Checks p and its gradient before an update: same shape, device and dtype.
  void check_param(const Tensor& p) const;

  // One parameter's part of a fused update: its K state tensors, and a variant that must be
  // the same for every parameter of one update (SGD's first step).
  template <size_t K>
  struct ParamStates {
    std::array<Tensor, K> states;
    int variant = 0;
  };
  // The step of a fused optimizer (Note [capturable optimizers]): for each group, the
  // parameters with a gradient in lists of one device, dtype and variant, each list one call
  // update(list, scalars, variant) — a fused::*_update, one launch on a GPU. states(i, p)
  // gives parameter i's ParamStates<K>; with counts_steps, each parameter's count of updates
  // is advanced (here when eager, by the update when capturable). The found_inf is GradScaler's
  // (the one step_if_finite passes; a capturable step only). Bumps the parameters' versions.
  template <size_t K, typename States, typename Update>
  void fused_step(bool counts_steps, States&& states, Update&& update);

  int64_t step_count_ = 0;
  bool capturable_ = false;  // set by the optimizers that have the option

 private:
  const char* name_;
  const char* step_event_name_;       // "Optimizer.step#<name>.step"
  const char* zero_grad_event_name_;  // "Optimizer.zero_grad#<name>.zero_grad"
  std::vector<ParamGroup> groups_;
  std::map<size_t, std::map<std::string, Tensor>> state_;
  Tensor found_inf_;  // while step_if_finite steps a capturable optimizer

  // A capturable step's scalars on `device`: the group's device_lr (made or rewritten as
  // needed) and parameter i's count of updates as a () float64 tensor there.
  const Tensor& device_lr(ParamGroup& group, Device device);
  const Tensor& device_step(size_t i, const Tensor& p);
};

template <size_t K, typename States, typename Update>
void Optimizer::fused_step(bool counts_steps, States&& states, Update&& update) {
  // The profiler's range around the step ("Optimizer.step#Adam.step", as PyTorch names it).
  const profiler::ScopedEvent event(step_event_name_, profiler::EventKind::Annotation);
  struct List {
    Device device;
    DType dtype;
    int variant;
    fused::ParamList<K> list;
    fused::UpdateScalars scalars;
  };
  // Every group checked before any count moves or any parameter changes.
  for (const ParamGroup& group : groups_) {
    const Tensor* first = nullptr;  // the group's first parameter with a gradient
    for (const Tensor& p : group.params) {
      if (!p.grad().defined()) continue;
      check_param(p);
      if (!first) first = &p;
      LOOM_CHECK(!capturable_ || p.device() == first->device(), ValueError, name_,
                 ": a capturable optimizer keeps one learning rate per group on one device; this group has "
                 "parameters on ", first->device(), " and ", p.device());
    }
  }
  size_t i = 0;
  for (ParamGroup& group : groups_) {
    std::vector<List> lists;  // usually one
    for (Tensor& p : group.params) {
      const size_t index = i++;
      if (!p.grad().defined()) continue;
      ParamStates<K> s = states(index, p);
      auto it = std::find_if(lists.begin(), lists.end(), [&](const List& l) {
        return l.device == p.device() && l.dtype == p.dtype() && l.variant == s.variant;
      });
      if (it == lists.end()) it = lists.insert(lists.end(), List{p.device(), p.dtype(), s.variant, {}, {}});
      it->list.params.push_back(p);
      it->list.grads.push_back(p.grad());
      it->list.states.push_back(std::move(s.states));
      if (!capturable_) it->scalars.steps.push_back(counts_steps ? double(advance_step(index)) : 0.0);
      else if (counts_steps) it->scalars.device_steps.push_back(device_step(index, p));
    }
    for (List& l : lists) {
      if (capturable_) {
        l.scalars.device_lr = device_lr(group, l.device);
        l.scalars.found_inf = found_inf_;
      } else {
        l.scalars.lr = group.lr;
      }
      update(l.list, l.scalars, l.variant);
      for (Tensor& p : l.list.params) p.bump_version();
    }
  }
}

}  // namespace loom::optim
