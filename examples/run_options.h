// The command-line options that the training examples share, spelled once:
//
//   examples::add_training_options(app, device_name, epochs, batch_size, lr);  // --device --epochs --batch-size --lr
//   examples::add_text_task_options(app, data_options, deterministic, workers);  // --seed --deterministic ... (text)
//   examples::MetricsOutput output{"runs/NAME"};  output.add_to(app);           // --out --tensorboard
//   examples::add_accum_steps_option(app, accum_steps);                         // --accum-steps
//   train::MetricsLog log(output.dir, "NAME");  output.attach(log);
//
// Each adds its options where it is called, so every example's --help keeps its own order.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "loom.h"
#include "text_task.h"

namespace examples {

inline void add_training_options(CLI::App& app, std::string& device_name, int& epochs, size_t& batch_size,
                                 double& lr) {
  app.add_option("--device", device_name, "cpu or cuda");
  app.add_option("--epochs", epochs);
  app.add_option("--batch-size", batch_size);
  app.add_option("--lr", lr);
}

// Where the metrics go: --out (the folder of the metrics, curves and summary) and --tensorboard.
struct MetricsOutput {
  std::string dir;
  std::string tensorboard_dir;  // --tensorboard: empty for none

  void add_to(CLI::App& app, const char* out_help = "folder for metrics, curves and the summary") {
    app.add_option("--out", dir, out_help);
    app.add_option("--tensorboard", tensorboard_dir, "also write the metrics as TensorBoard event files here");
  }
  // The log writes TensorBoard event files too where --tensorboard asks for them.
  void attach(loom::train::MetricsLog& log) const {
    if (!tensorboard_dir.empty()) log.write_tensorboard(tensorboard_dir);
  }
};

// The text-classification examples' --seed (data_options.seed), --deterministic, --train-limit
// and --workers.
inline void add_text_task_options(CLI::App& app, TextTaskOptions& data_options, bool& deterministic,
                                  size_t& workers) {
  app.add_option("--seed", data_options.seed);
  app.add_flag("--deterministic", deterministic,
               "deterministic algorithms only (loom::use_deterministic_algorithms): the same bits run after run");
  app.add_option("--train-limit", data_options.train_limit, "train on the first N training texts only");
  app.add_option("--workers", workers, "DataLoader worker threads");
}

inline void add_accum_steps_option(CLI::App& app, size_t& accum_steps) {
  app.add_option("--accum-steps", accum_steps, "micro-batches per optimizer step (gradient accumulation)")
      ->check(CLI::PositiveNumber);
}

}  // namespace examples
