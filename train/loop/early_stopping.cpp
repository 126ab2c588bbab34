#include "train/loop/early_stopping.h"

#include <cmath>

#include "core/factories.h"
#include "optim/state_entry.h"

namespace loom::train {

EarlyStopping::EarlyStopping(int64_t patience, double min_delta, std::string mode)
    : patience_(patience), min_delta_(min_delta), mode_(std::move(mode)) {
  LOOM_CHECK(patience >= 0, ValueError, "EarlyStopping: patience must be non-negative, got ", patience);
  LOOM_CHECK(std::isfinite(min_delta) && min_delta >= 0, ValueError,
             "EarlyStopping: min_delta must be finite and non-negative, got ", min_delta);
  LOOM_CHECK(mode_ == "min" || mode_ == "max", ValueError, "EarlyStopping: mode must be \"min\" or \"max\", got \"",
             mode_, "\"");
}

bool EarlyStopping::step(double value) {
  ++epochs_;
  const bool improved = !std::isnan(value) && (best_epoch_ == 0 || (mode_ == "min" ? value < best_ - min_delta_
                                                                                     : value > best_ + min_delta_));
  if (improved) {
    best_ = value;
    best_epoch_ = epochs_;
    epochs_since_best_ = 0;
  } else {
    ++epochs_since_best_;
  }
  return improved;
}

std::optional<double> EarlyStopping::best() const {
  if (best_epoch_ == 0) return std::nullopt;
  return best_;
}

optim::StateDict EarlyStopping::state_dict() const {
  return {{"best", scalar_tensor(best_, kFloat64)},
          {"best_epoch", scalar_tensor(best_epoch_, kInt64)},
          {"epochs", scalar_tensor(epochs_, kInt64)},
          {"epochs_since_best", scalar_tensor(epochs_since_best_, kInt64)},
          {"mode", scalar_tensor(int64_t(mode_ == "max"), kInt64)}};
}

void EarlyStopping::load_state_dict(const optim::StateDict& state) {
  const std::string who = "EarlyStopping";
  optim::check_no_unexpected_keys(state, {"best", "best_epoch", "epochs", "epochs_since_best", "mode"}, who);
  const double best = optim::real_entry(state, "best", who);
  const int64_t best_epoch = optim::count_entry(state, "best_epoch", who);
  const int64_t epochs = optim::count_entry(state, "epochs", who);
  const int64_t since = optim::count_entry(state, "epochs_since_best", who);
  const int64_t mode = optim::count_entry(state, "mode", who);
  LOOM_CHECK(mode == int64_t(mode_ == "max"), ValueError, who, ".load_state_dict: 'mode' is ", mode,
             " (", mode == 0 ? "\"min\"" : mode == 1 ? "\"max\"" : "neither", "), this one's is \"", mode_, "\"");
  LOOM_CHECK(best_epoch <= epochs && (best_epoch == 0 ? since == epochs : since == epochs - best_epoch), ValueError,
             who, ".load_state_dict: inconsistent counts: best_epoch ", best_epoch, ", epochs ", epochs,
             ", epochs_since_best ", since);
  best_ = best;
  best_epoch_ = best_epoch;
  epochs_ = epochs;
  epochs_since_best_ = since;
}

void EarlyStopping::check_state_dict(const optim::StateDict& state) const {
  EarlyStopping scratch = *this;
  scratch.load_state_dict(state);
}

}  // namespace loom::train
