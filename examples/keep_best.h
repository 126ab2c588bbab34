// --keep-best, --monitor and --patience for the text-classification examples: a
// train::EarlyStopping on the held-out loss or accuracy, the checkpoint of the best epoch,
// and at the end that epoch's model reloaded, evaluated and reported.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <string>

#include "loom.h"
#include "text_task.h"

namespace examples {

struct KeepBestOptions {
  std::string path;                  // --keep-best: empty for none
  std::string monitor = "test_loss";  // or "test_acc"
  int patience = 0;                  // 0: never stop early

  void add_to(CLI::App& app) {
    app.add_option("--keep-best", path, "keep the checkpoint of the best held-out epoch here; report that model");
    app.add_option("--monitor", monitor, "what --keep-best and --patience watch")
        ->check(CLI::IsMember({"test_loss", "test_acc"}));
    app.add_option("--patience", patience, "stop after this many epochs without a better held-out epoch (0: never)")
        ->check(CLI::NonNegativeNumber);
  }
  loom::train::EarlyStopping stopper() const {
    return loom::train::EarlyStopping(patience > 0 ? patience : std::numeric_limits<int>::max(), 0.0,
                                      monitor == "test_loss" ? "min" : "max");
  }
  double monitored(const Evaluation& e) const { return monitor == "test_loss" ? e.loss : e.accuracy; }
  // The best epoch's checkpoint, and the vocabulary beside it (vocab_beside): what exporting
  // or resuming the file alone needs to map words to the embedding's rows.
  void save(const loom::optim::Checkpoint& checkpoint, const loom::data::Vocab& vocab) const {
    loom::optim::save_checkpoint(path, checkpoint);
    vocab.save(vocab_beside(path));
  }
};

// After training: the best epoch's model (when --keep-best saved one) reloaded and
// evaluated, or `last` unchanged.
template <typename Loader, typename Model>
Evaluation reload_best(const KeepBestOptions& o, const loom::train::EarlyStopping& stopper, Loader& test_loader,
                       Model& model, loom::Device device, Evaluation last) {
  if (o.path.empty() || stopper.best_epoch() == 0) return last;
  loom::optim::load_checkpoint(o.path, {&model});  // the model only; the rest is not needed
  std::printf("best epoch %lld (%s %.4f): reloaded from %s\n", static_cast<long long>(stopper.best_epoch()),
              o.monitor.c_str(), *stopper.best(), o.path.c_str());
  return evaluate(test_loader, model, device);
}

// The line an early stop prints.
inline void report_early_stop(const KeepBestOptions& o, const loom::train::EarlyStopping& stopper) {
  if (stopper.should_stop())
    std::printf("early stop: no better %s in %lld epochs since epoch %lld\n", o.monitor.c_str(),
                static_cast<long long>(stopper.epochs_since_best()), static_cast<long long>(stopper.best_epoch()));
}

}  // namespace examples
