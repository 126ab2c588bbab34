// RunSummary: the few numbers printed at the end of a training run — epochs, time per
// epoch, throughput, peak memory and the final metrics.
//
//   train::RunSummary summary;
//   for (...) { summary.start_epoch(); ...; summary.end_epoch(tokens_this_epoch); }
//   summary.set("test_accuracy", acc);
//   std::cout << summary.format("tokens");
//
// Peak host memory is the process's peak resident set (getrusage); a CUDA run reports
// its device allocator's peak with set_peak_device_memory. to_json() returns the
// same as one line of JSON text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/device.h"
#include "train/metrics/progress.h"  // Clock

namespace loom::train {

class RunSummary {
 public:
  // The total time runs from construction.
  explicit RunSummary(Clock clock = {});

  // Throws ValueError for start_epoch twice in a row or end_epoch without start_epoch.
  void start_epoch();
  void end_epoch(size_t items);  // tokens or samples processed in the epoch
  // A final metric such as "test_accuracy"; setting a key again replaces its value.
  void set(std::string key, double value);
  void set_peak_device_memory(size_t bytes, std::string device_name);
  // For a run on `device`: a CUDA device's peak (cuda::max_memory_allocated) and name are
  // read now; the CPU needs nothing (its peak is the process's).
  void record_device_peak(Device device);

  // The process's peak resident set size so far, in bytes (0 where unknown).
  static size_t peak_host_memory_bytes();

  size_t epochs() const { return epoch_seconds_.size(); }
  const std::vector<double>& epoch_seconds() const { return epoch_seconds_; }
  size_t items() const { return items_; }
  double total_seconds() const;      // since construction
  double items_per_second() const;   // items / time spent in epochs (0 before any)

  // A few indented lines, e.g.
  //   epochs          3
  //   total time      00:12 (12.50 s)
  //   time per epoch  4.00 s mean: 3.90 4.10 4.00 s
  //   throughput      12.3k tokens/s (150k tokens)
  //   peak memory     host 412.0 MiB, cuda:0 1.50 GiB
  //   test_accuracy   0.8123
  std::string format(std::string_view item_name = "tokens") const;
  std::string to_json() const;  // one line of JSON

 private:
  Clock clock_;
  double start_;
  std::optional<double> epoch_start_;
  std::vector<double> epoch_seconds_;
  size_t items_ = 0;
  std::vector<std::pair<std::string, double>> metrics_;  // in the order first set
  std::optional<std::pair<std::string, size_t>> device_peak_;  // device name, bytes
};

// Bytes with a binary unit: 512 B, 1.5 KiB, 412.0 MiB, 1.50 GiB.
std::string format_bytes(size_t bytes);

}  // namespace loom::train
