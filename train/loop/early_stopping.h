// EarlyStopping: stop when a held-out metric has not improved for `patience` epochs, and
// know which epoch was the best, as PyTorch Lightning's EarlyStopping callback
// (patience, min_delta, mode) and the "keep the best checkpoint" loop written around it.
//
//   train::EarlyStopping stopper(/*patience=*/3, /*min_delta=*/0.0, "min");
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     ...train...; double held_out = evaluate(...);
//     if (stopper.step(held_out)) optim::save_checkpoint("best.safetensors", {...});
//     if (stopper.should_stop()) break;
//   }
//   optim::load_weights / load_checkpoint("best.safetensors", ...)   // the best model seen
//
// An epoch improves on the best when its value is below best - min_delta ("min") or above
// best + min_delta ("max"); the first epoch always does. A NaN value never improves.
// state_dict()/load_state_dict() carry it through a resumed run (optim::Checkpoint::extra).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "optim/optimizer.h"  // StateDict

namespace loom::train {

class EarlyStopping {
 public:
  // patience >= 0 epochs without improvement before should_stop(); min_delta >= 0 and
  // finite; mode "min" or "max". Anything else is a ValueError.
  explicit EarlyStopping(int64_t patience = 3, double min_delta = 0.0, std::string mode = "min");

  // Records one epoch's metric; returns whether it is the new best.
  bool step(double value);
  // patience epochs in a row (at least one) without improvement.
  bool should_stop() const { return epochs_since_best_ > 0 && epochs_since_best_ >= patience_; }

  int64_t epochs() const { return epochs_; }            // step() calls so far
  std::optional<double> best() const;                   // none before the first step
  int64_t best_epoch() const { return best_epoch_; }    // 1-based; 0 before the first step
  int64_t epochs_since_best() const { return epochs_since_best_; }
  int64_t patience() const { return patience_; }
  double min_delta() const { return min_delta_; }
  const std::string& mode() const { return mode_; }

  // {best (float64), best_epoch, epochs, epochs_since_best (int64), mode (int64: 0 "min",
  // 1 "max")}. load_state_dict checks every entry (and that the mode is this one's) before
  // it changes anything: ValueError naming the key.
  optim::StateDict state_dict() const;
  void load_state_dict(const optim::StateDict& state);
  // The same checks, changing nothing (optim::Checkpoint::check_extra).
  void check_state_dict(const optim::StateDict& state) const;

 private:
  int64_t patience_;
  double min_delta_;
  std::string mode_;
  double best_ = 0;
  int64_t best_epoch_ = 0, epochs_ = 0, epochs_since_best_ = 0;
};

}  // namespace loom::train
