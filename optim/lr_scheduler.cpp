// The schedulers of optim/lr_scheduler.h, and the checks their load_state_dict makes on
// a state dict read from a file.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "core/factories.h"
#include "optim/adam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "optim/state_entry.h"

namespace loom::optim {

// ---- LRScheduler ----------------------------------------------------------------------

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  for (ParamGroup& g : optimizer_.param_groups()) g.set_lr(lr_at(g.initial_lr));
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const ParamGroup& g : optimizer_.param_groups()) out.push_back(g.lr);
  return out;
}

StateDict LRScheduler::state_dict() const { return {{"last_epoch", scalar_tensor(last_epoch_, kInt64)}}; }

void LRScheduler::check_state_dict(const StateDict& state) const {
  check_no_unexpected_keys(state, {"last_epoch"}, "LRScheduler");
  count_entry(state, "last_epoch", "LRScheduler");
}

void LRScheduler::load_state_dict(const StateDict& state) {
  check_state_dict(state);
  last_epoch_ = count_entry(state, "last_epoch", "LRScheduler");
  apply();
}

// ---- closed-form schedules ----------------------------------------------------------------

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  LOOM_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got ", step_size);
  apply();
}
double StepLR::lr_at(double base) const { return base * std::pow(gamma_, double(last_epoch_ / step_size_)); }

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(opt), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  apply();
}
double MultiStepLR::lr_at(double base) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  return base * std::pow(gamma_, double(passed));
}

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma) : LRScheduler(opt), gamma_(gamma) { apply(); }
double ExponentialLR::lr_at(double base) const { return base * std::pow(gamma_, double(last_epoch_)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt), T_max_(T_max), eta_min_(eta_min) {
  LOOM_CHECK(T_max > 0, ValueError, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  apply();
}
double CosineAnnealingLR::lr_at(double base) const {
  return eta_min_ + (base - eta_min_) * (1 + std::cos(std::numbers::pi * double(last_epoch_) / double(T_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt), start_(start_factor), end_(end_factor), total_(total_iters) {
  LOOM_CHECK(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1, ValueError,
             "LinearLR: factors must be in (0, 1] and [0, 1], got ", start_factor, " and ", end_factor);
  LOOM_CHECK(total_iters > 0, ValueError, "LinearLR: total_iters must be positive, got ", total_iters);
  apply();
}
double LinearLR::lr_at(double base) const {
  const double t = double(std::min(last_epoch_, total_)) / double(total_);
  return base * (start_ + (end_ - start_) * t);
}

// ---- OneCycleLR -------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& opt, const OneCycleOptions& o) : LRScheduler(opt), o_(o) {
  LOOM_CHECK(o.total_steps_ > 0, ValueError, "OneCycleLR: total_steps must be positive, got ", o.total_steps_);
  LOOM_CHECK(o.pct_start_ >= 0 && o.pct_start_ <= 1, ValueError, "OneCycleLR: pct_start must be in [0, 1], got ",
             o.pct_start_);
  LOOM_CHECK(o.anneal_strategy_ == "cos" || o.anneal_strategy_ == "linear", ValueError,
             "OneCycleLR: anneal_strategy must be 'cos' or 'linear', got '", o.anneal_strategy_, "'");
  for (ParamGroup& g : optimizer_.param_groups()) g.initial_lr = o.max_lr_ / o.div_factor_;
  if (o.cycle_momentum_) {
    LOOM_CHECK(dynamic_cast<SGD*>(&opt) || dynamic_cast<RMSprop*>(&opt) || dynamic_cast<Adam*>(&opt), ValueError,
               "OneCycleLR: cycle_momentum needs an optimizer with momentum (SGD, RMSprop) or betas (Adam); ",
               opt.name(), " has neither (pass cycle_momentum(false))");
  }
  apply();
  set_momentum();
}

void OneCycleLR::step() {
  LOOM_CHECK(last_epoch_ + 1 <= o_.total_steps_, ValueError, "OneCycleLR: tried to step ", last_epoch_ + 1,
             " times; the specified number of total steps is ", o_.total_steps_);
  LRScheduler::step();
  set_momentum();
}

void OneCycleLR::check_state_dict(const StateDict& state) const {
  LRScheduler::check_state_dict(state);
  const int64_t last_epoch = count_entry(state, "last_epoch", "OneCycleLR");
  LOOM_CHECK(last_epoch <= o_.total_steps_, ValueError, "OneCycleLR.load_state_dict: 'last_epoch' must be at most ",
             "total_steps = ", o_.total_steps_, ", got ", last_epoch);
}

void OneCycleLR::load_state_dict(const StateDict& state) {
  LRScheduler::load_state_dict(state);
  set_momentum();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.anneal_strategy_ == "linear") return (end - start) * pct + start;
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
}

// Phase 1 goes initial -> peak over [0, pct_start * total - 1], phase 2 peak -> final.
double OneCycleLR::schedule(double initial, double peak, double final_value) const {
  const double end1 = o_.pct_start_ * double(o_.total_steps_) - 1;
  const double end2 = double(o_.total_steps_) - 1;
  const double step = double(last_epoch_);
  if (step <= end1) return anneal(initial, peak, step / end1);
  return anneal(peak, final_value, (step - end1) / (end2 - end1));
}

double OneCycleLR::lr_at(double base) const {
  // base is initial_lr = max_lr / div_factor.
  return schedule(base, o_.max_lr_, base / o_.final_div_factor_);
}

void OneCycleLR::set_momentum() {
  if (!o_.cycle_momentum_) return;
  const double m = schedule(o_.max_momentum_, o_.base_momentum_, o_.max_momentum_);
  if (auto* sgd = dynamic_cast<SGD*>(&optimizer_)) sgd->options.momentum_ = m;
  if (auto* rmsprop = dynamic_cast<RMSprop*>(&optimizer_)) rmsprop->options.momentum_ = m;
  if (auto* adam = dynamic_cast<Adam*>(&optimizer_)) adam->options.beta1_ = m;
}

// ---- ReduceLROnPlateau ---------------------------------------------------------------------------

namespace {

void check_plateau_options(const ReduceLROnPlateauOptions& o, const std::string& who) {
  LOOM_CHECK(o.mode_ == "min" || o.mode_ == "max", ValueError, who, ": mode must be 'min' or 'max', got '", o.mode_,
             "'");
  LOOM_CHECK(o.threshold_mode_ == "rel" || o.threshold_mode_ == "abs", ValueError, who,
             ": threshold_mode must be 'rel' or 'abs', got '", o.threshold_mode_, "'");
  LOOM_CHECK(o.factor_ < 1.0, ValueError, who, ": factor must be < 1, got ", o.factor_);
  LOOM_CHECK(o.factor_ >= 0, ValueError, who, ": factor must be non-negative, got ", o.factor_);
  // The floor, the threshold and the smallest change: finite and non-negative (a NaN, an
  // infinite or a negative one makes every lr inf/NaN or every epoch an improvement).
  LOOM_CHECK(std::isfinite(o.min_lr_) && o.min_lr_ >= 0, ValueError, who,
             ": min_lr must be finite and non-negative, got ", o.min_lr_);
  LOOM_CHECK(std::isfinite(o.threshold_) && o.threshold_ >= 0, ValueError, who,
             ": threshold must be finite and non-negative, got ", o.threshold_);
  LOOM_CHECK(std::isfinite(o.eps_) && o.eps_ >= 0, ValueError, who, ": eps must be finite and non-negative, got ",
             o.eps_);
  LOOM_CHECK(o.patience_ >= 0, ValueError, who, ": patience must be non-negative, got ", o.patience_);
  LOOM_CHECK(o.cooldown_ >= 0, ValueError, who, ": cooldown must be non-negative, got ", o.cooldown_);
}

// The state dict's codes for the two string options.
const char* const kModes[] = {"min", "max"};
const char* const kThresholdModes[] = {"rel", "abs"};

}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauOptions& o) : optimizer_(opt), o_(o) {
  check_plateau_options(o, "ReduceLROnPlateau");
  best_ = o.mode_ == "min" ? INFINITY : -INFINITY;
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  const bool rel = o_.threshold_mode_ == "rel";
  if (o_.mode_ == "min") return rel ? a < best * (1 - o_.threshold_) : a < best - o_.threshold_;
  return rel ? a > best * (1 + o_.threshold_) : a > best + o_.threshold_;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > o_.patience_) {
    for (ParamGroup& g : optimizer_.param_groups()) {
      const double new_lr = std::max(g.lr * o_.factor_, o_.min_lr_);
      if (g.lr - new_lr > o_.eps_) g.set_lr(new_lr);
    }
    cooldown_counter_ = o_.cooldown_;
    num_bad_epochs_ = 0;
  }
}

StateDict ReduceLROnPlateau::state_dict() const {
  auto real = [](double v) { return scalar_tensor(v, kFloat64); };
  auto integer = [](int64_t v) { return scalar_tensor(v, kInt64); };
  return {{"best", real(best_)},
          {"num_bad_epochs", integer(num_bad_epochs_)},
          {"cooldown_counter", integer(cooldown_counter_)},
          {"last_epoch", integer(last_epoch_)},
          {"mode", integer(o_.mode_ == kModes[1])},
          {"factor", real(o_.factor_)},
          {"patience", integer(o_.patience_)},
          {"threshold", real(o_.threshold_)},
          {"threshold_mode", integer(o_.threshold_mode_ == kThresholdModes[1])},
          {"cooldown", integer(o_.cooldown_)},
          {"min_lr", real(o_.min_lr_)},
          {"eps", real(o_.eps_)}};
}

namespace {

// A ReduceLROnPlateau state dict, read and checked.
struct PlateauState {
  ReduceLROnPlateauOptions options;
  double best;
  int64_t num_bad_epochs, cooldown_counter, last_epoch;
};

PlateauState read_plateau_state(const StateDict& state) {
  const std::string who = "ReduceLROnPlateau";
  check_no_unexpected_keys(state,
                           {"best", "num_bad_epochs", "cooldown_counter", "last_epoch", "mode", "factor", "patience",
                            "threshold", "threshold_mode", "cooldown", "min_lr", "eps"},
                           who);
  auto choice = [&](const std::string& key, const char* const (&names)[2]) -> std::string {
    const int64_t v = state_entry(state, key, kInt64, who).item<int64_t>();
    LOOM_CHECK(v == 0 || v == 1, ValueError, who, ".load_state_dict: '", key, "' must be 0 ('", names[0], "') or 1 ('",
               names[1], "'), got ", v);
    return names[v];
  };
  PlateauState out{};
  out.best = real_entry(state, "best", who);
  out.num_bad_epochs = count_entry(state, "num_bad_epochs", who);
  out.cooldown_counter = count_entry(state, "cooldown_counter", who);
  out.last_epoch = count_entry(state, "last_epoch", who);
  ReduceLROnPlateauOptions& o = out.options;
  o.mode_ = choice("mode", kModes);
  o.factor_ = real_entry(state, "factor", who);
  o.patience_ = state_entry(state, "patience", kInt64, who).item<int64_t>();
  o.threshold_ = real_entry(state, "threshold", who);
  o.threshold_mode_ = choice("threshold_mode", kThresholdModes);
  o.cooldown_ = state_entry(state, "cooldown", kInt64, who).item<int64_t>();
  o.min_lr_ = real_entry(state, "min_lr", who);
  o.eps_ = real_entry(state, "eps", who);
  check_plateau_options(o, who + ".load_state_dict");
  return out;
}

}  // namespace

void ReduceLROnPlateau::check_state_dict(const StateDict& state) const { read_plateau_state(state); }

void ReduceLROnPlateau::load_state_dict(const StateDict& state) {
  // Everything is read and checked before anything changes.
  PlateauState loaded = read_plateau_state(state);
  o_ = std::move(loaded.options);
  best_ = loaded.best;
  num_bad_epochs_ = loaded.num_bad_epochs;
  cooldown_counter_ = loaded.cooldown_counter;
  last_epoch_ = loaded.last_epoch;
}

}  // namespace loom::optim
