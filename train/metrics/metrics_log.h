// MetricsLog: a training run's numbers on disk (CSV for spreadsheets and pandas, JSON
// Lines for scripts) and in memory (for plots and the run summary).
//
//   train::MetricsLog log("runs", "sentiment");
//   log.log_step(epoch, step, {{"loss", loss}, {"lr", lr}});
//   log.log_epoch(epoch, {{"train_loss", tl}, {"val_loss", vl}, {"val_acc", va}});
//
// writes runs/sentiment_steps.csv, _steps.jsonl, _epochs.csv and _epochs.jsonl. Each row
// holds epoch (and step), time_s (seconds since the log was opened) and the values. A CSV
// has one set of columns, so the first row's keys fix them and a later row with other keys
// is a ValueError. Numbers are written so that they read back bit-identically (shortest
// round-trip form); NaN and infinities are nan/inf/-inf in the CSV and null in JSON (which
// has no NaN). Every log_epoch flushes all four files, so a crash loses at most the steps
// of the epoch in progress.
//
//   log.write_tensorboard("runs/tb/sentiment");
//
// also writes every row from then on as TensorBoard scalars (summary_writer.h): a step
// row's values as "step/<key>" at the step number, an epoch row's as "epoch/<key>" at the
// epoch number; flushed with the files.
#pragma once

#include <cstddef>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "train/metrics/progress.h"  // Clock
#include "train/tensorboard/summary_writer.h"

namespace loom::train {

// Named values of one row, in column order.
using Values = std::vector<std::pair<std::string, double>>;

struct Row {
  size_t epoch = 0;
  size_t step = 0;    // 0 in epoch rows
  double time_s = 0;  // seconds since the log was opened
  Values values;

  std::optional<double> get(std::string_view key) const;
};

class MetricsLog {
 public:
  // Creates dir if missing and truncates the four files. Throws SerializationError naming
  // the path and the system's reason when the directory or a file cannot be created, and
  // ValueError for a name that is empty or has a path separator.
  MetricsLog(const std::string& dir, std::string name, Clock clock = {});

  // Keys must be non-empty, unique, not epoch/step/time_s, and free of commas, quotes and
  // line breaks (they are CSV column names).
  void log_step(size_t epoch, size_t step, const Values& values);
  void log_epoch(size_t epoch, const Values& values);
  void flush();
  // Mirrors the rows to a SummaryWriter on log_dir (above); SerializationError as its.
  void write_tensorboard(const std::string& log_dir);
  const SummaryWriter* tensorboard() const { return tensorboard_.get(); }

  const std::vector<Row>& steps() const { return steps_.rows; }
  const std::vector<Row>& epochs() const { return epochs_.rows; }
  // The columns fixed by the first row (empty before it).
  const std::vector<std::string>& step_keys() const { return steps_.keys; }
  const std::vector<std::string>& epoch_keys() const { return epochs_.keys; }
  const std::string& name() const { return name_; }
  // The four files: steps csv, steps jsonl, epochs csv, epochs jsonl.
  std::vector<std::string> paths() const;

 private:
  // One pair of files (CSV and JSONL) and its rows.
  struct Table {
    std::string kind;  // "steps" or "epochs"
    bool has_step = false;
    std::string csv_path, jsonl_path;
    std::ofstream csv, jsonl;
    std::vector<std::string> keys;
    std::vector<Row> rows;
  };
  void open(Table& t, const std::string& dir, const std::string& kind, bool has_step);
  void append(Table& t, Row row);
  void check_written(const Table& t) const;

  std::string name_;
  Clock clock_;
  double start_;
  Table steps_, epochs_;
  std::unique_ptr<SummaryWriter> tensorboard_;  // null unless write_tensorboard was called
};

}  // namespace loom::train
