// Learning-rate schedulers, as torch.optim.lr_scheduler. Construct one after the
// optimizer; call step() once per epoch (or per batch for OneCycleLR) after
// optimizer.step(). The closed-form ones set every group's lr from its initial_lr;
// ReduceLROnPlateau scales the current lrs. They write each group's lr with
// ParamGroup::set_lr, which also writes a capturable optimizer's copy on the device
// without waiting (Note [capturable optimizers]). Any of them saves its state in a training
// checkpoint (optim/checkpoint.h) through the Scheduler interface.
#pragma once

#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace loom::optim {

// Any scheduler, as a checkpoint sees it: state that can be saved and restored, as
// PyTorch saves any scheduler's state_dict(). load_state_dict treats the state as hostile
// input: a missing, ill-typed, out-of-range or unexpected key throws ValueError naming it
// and leaves the scheduler as it was. check_state_dict makes the same checks and changes
// nothing (so that a checkpoint can check every part before it restores any).
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual StateDict state_dict() const = 0;
  virtual void check_state_dict(const StateDict& state) const = 0;
  virtual void load_state_dict(const StateDict& state) = 0;
};

// The closed-form schedulers' base; its state is last_epoch (int64).
class LRScheduler : public Scheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {}
  virtual void step();
  int64_t last_epoch() const { return last_epoch_; }
  std::vector<double> get_last_lr() const;
  StateDict state_dict() const override;
  void check_state_dict(const StateDict& state) const override;
  void load_state_dict(const StateDict& state) override;

 protected:
  // The lr of a group with initial lr `base` at epoch last_epoch_.
  virtual double lr_at(double base) const = 0;
  void apply();  // sets the lrs for last_epoch_
  Optimizer& optimizer_;
  int64_t last_epoch_ = 0;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
 protected:
  double lr_at(double base) const override;
 private:
  int64_t step_size_;
  double gamma_;
};

// The lr is multiplied by gamma at each milestone (in any order; a repeated one counts twice).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma = 0.1);
 protected:
  double lr_at(double base) const override;
 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);
 protected:
  double lr_at(double base) const override;
 private:
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
 protected:
  double lr_at(double base) const override;
 private:
  int64_t T_max_;
  double eta_min_;
};

// Linear warm-up: the factor goes from start_factor to end_factor over total_iters steps.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
 protected:
  double lr_at(double base) const override;
 private:
  double start_, end_;
  int64_t total_;
};

struct OneCycleOptions {
  OneCycleOptions(double max_lr, int64_t total_steps) : max_lr_(max_lr), total_steps_(total_steps) {}
  OneCycleOptions& pct_start(double p) { pct_start_ = p; return *this; }
  OneCycleOptions& anneal_strategy(std::string s) { anneal_strategy_ = std::move(s); return *this; }
  OneCycleOptions& div_factor(double d) { div_factor_ = d; return *this; }
  OneCycleOptions& final_div_factor(double d) { final_div_factor_ = d; return *this; }
  OneCycleOptions& cycle_momentum(bool c) { cycle_momentum_ = c; return *this; }
  OneCycleOptions& momentum_range(double base, double max) { base_momentum_ = base; max_momentum_ = max; return *this; }
  double max_lr_;
  int64_t total_steps_;
  double pct_start_ = 0.3;
  std::string anneal_strategy_ = "cos";  // or "linear"
  double div_factor_ = 25, final_div_factor_ = 1e4;
  bool cycle_momentum_ = true;  // cycles SGD's / RMSprop's momentum or Adam's beta1, as PyTorch
  double base_momentum_ = 0.85, max_momentum_ = 0.95;
};

// One cycle: warm up from max_lr / div_factor to max_lr, then anneal to
// initial / final_div_factor; step() once per batch, total_steps times at most.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, const OneCycleOptions& options);
  void step() override;
  void check_state_dict(const StateDict& state) const override;  // also: last_epoch <= total_steps
  void load_state_dict(const StateDict& state) override;  // also restores the momentum
 protected:
  double lr_at(double base) const override;
 private:
  double anneal(double start, double end, double pct) const;
  double schedule(double initial, double peak, double final_value) const;
  void set_momentum();
  OneCycleOptions o_;
};

// Cuts the lr by `factor` when a metric stops improving for `patience` epochs.
struct ReduceLROnPlateauOptions {
  ReduceLROnPlateauOptions& mode(std::string m) { mode_ = std::move(m); return *this; }
  ReduceLROnPlateauOptions& factor(double f) { factor_ = f; return *this; }
  ReduceLROnPlateauOptions& patience(int64_t p) { patience_ = p; return *this; }
  ReduceLROnPlateauOptions& threshold(double t) { threshold_ = t; return *this; }
  ReduceLROnPlateauOptions& threshold_mode(std::string m) { threshold_mode_ = std::move(m); return *this; }
  ReduceLROnPlateauOptions& cooldown(int64_t c) { cooldown_ = c; return *this; }
  ReduceLROnPlateauOptions& min_lr(double m) { min_lr_ = m; return *this; }
  ReduceLROnPlateauOptions& eps(double e) { eps_ = e; return *this; }
  std::string mode_ = "min";
  double factor_ = 0.1;
  int64_t patience_ = 10;
  double threshold_ = 1e-4;
  std::string threshold_mode_ = "rel";
  int64_t cooldown_ = 0;
  double min_lr_ = 0, eps_ = 1e-8;
};

// Its state dict holds what PyTorch's does, under PyTorch's names: the counters best
// (float64), num_bad_epochs, cooldown_counter, last_epoch (int64) and the options mode
// (int64: 0 "min", 1 "max"), factor, patience, threshold, threshold_mode (int64: 0 "rel",
// 1 "abs"), cooldown, min_lr, eps. Loading restores the options too, as PyTorch does. The
// current lrs are the optimizer's own state (param_groups.<g>.lr).
class ReduceLROnPlateau : public Scheduler {
 public:
  ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauOptions& options = {});
  void step(double metric);
  StateDict state_dict() const override;
  void check_state_dict(const StateDict& state) const override;
  void load_state_dict(const StateDict& state) override;
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t last_epoch() const { return last_epoch_; }
  const ReduceLROnPlateauOptions& options() const { return o_; }

 private:
  bool is_better(double a, double best) const;
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions o_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

}  // namespace loom::optim
