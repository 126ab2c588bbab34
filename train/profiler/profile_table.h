// What a profile's events add up to: each event's self and total times and memory
// (analyze), the key_averages() table of torch.profiler (per name: calls, self and total
// CPU and CUDA time, self and total memory, peak memory), and how much of each step's wall
// time its events account for (step_coverage).
//
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 15});
//
// Self time is an event's duration less its children's on the same thread (an op called
// inside another op, a kernel inside a backward node, a node inside Optimizer.step...).
// An op on a CUDA device has the GPU time between its two timing events as its CUDA total,
// and that less its CUDA children's as its self CUDA time; a range (a backward node, a
// user's Range, a step) has its descendants' CUDA time as its total and none of its own.
// Self memory is what was allocated minus what was freed while the event was the innermost
// one on its thread; total memory adds its descendants'; peak memory is the most that was
// live at once during the event above what was live when it began (its descendants'
// allocations included), per device kind. Times are nanoseconds, memory bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profiler.h"

namespace loom::profiler {

// An event as tables and tools name it: "loom::mul" for an op, "ProfilerStep#3" for a step,
// the recorded name otherwise.
std::string display_name(const Event& e);

struct EventStats {
  int64_t self_cpu_ns = 0;
  int64_t cuda_total_ns = 0, self_cuda_ns = 0;
  int64_t self_cpu_memory = 0, cpu_memory = 0, self_cuda_memory = 0, cuda_memory = 0;
  int64_t cpu_memory_peak = 0, cuda_memory_peak = 0;
  int depth = 0;  // 0: no parent among the recorded events
};

// A recording and its events' stats, made once by analyze() and read by every consumer: the
// table, the steps' coverage, the timeline page (a long profile has 10^5 events).
struct Analysis {
  const Recording& recording;
  std::vector<EventStats> stats;  // one per event, in recording.events' order
};
Analysis analyze(const Recording& r);

// A row of key_averages(): every event of one name (and, when grouped so, one input shape).
struct EventAverage {
  std::string key;           // display_name; "ProfilerStep*" for every step
  std::string input_shapes;  // when grouped by input shape
  EventKind kind = EventKind::Op;
  int64_t count = 0;
  int64_t self_cpu_ns = 0, cpu_total_ns = 0, self_cuda_ns = 0, cuda_total_ns = 0;
  int64_t self_cpu_memory = 0, cpu_memory = 0, self_cuda_memory = 0, cuda_memory = 0;
  int64_t cpu_memory_peak = 0, cuda_memory_peak = 0;  // the most of any one call
};

struct TableOptions {
  // A column, as torch.profiler names them: self_cpu_time_total, cpu_time_total, cpu_time
  // (the mean), self_cuda_time_total, cuda_time_total, cuda_time, self_cpu_memory_usage,
  // cpu_memory_usage, self_cuda_memory_usage, cuda_memory_usage, cpu_memory_peak,
  // cuda_memory_peak, count. Largest first.
  std::string sort_by = "self_cpu_time_total";
  size_t row_limit = 0;  // 0: every row
  size_t max_name_column_width = 55;
};

// Of each step (a scheduled Profile's ProfilerStep#N): its wall time, how much of it is inside
// the named events directly under it (the ops, backward nodes, optimizer steps ...), and the GPU
// time of the ops called in it (each op's own, so a nested op's time is not counted twice).
struct StepCoverage {
  int64_t steps = 0;
  int64_t wall_ns = 0;   // all steps together
  int64_t named_ns = 0;  // inside their children
  int64_t gpu_ns = 0;    // of their ops on a GPU
  double fraction() const { return wall_ns > 0 ? double(named_ns) / double(wall_ns) : 0; }
};
StepCoverage step_coverage(const Analysis& a);

class KeyAverages {
 public:
  KeyAverages(const Analysis& a, bool group_by_input_shape);

  const std::vector<EventAverage>& rows() const { return rows_; }
  int64_t self_cpu_time_total_ns() const { return self_cpu_total_; }
  int64_t self_cuda_time_total_ns() const { return self_cuda_total_; }
  const StepCoverage& steps() const { return steps_; }

  // The rows sorted by options.sort_by (ValueError naming the columns for another name),
  // the first row_limit of them, as torch.profiler's table(): the CUDA columns only when a
  // CUDA op was recorded, the memory ones only with profile_memory, the input shapes only
  // when grouped by them; then the totals, and the steps' coverage when there were steps.
  std::string table(const TableOptions& options = {}) const;

 private:
  std::vector<EventAverage> rows_;
  int64_t self_cpu_total_ = 0, self_cuda_total_ = 0;
  bool has_cuda_ = false, has_memory_ = false, by_shape_ = false;
  StepCoverage steps_;
};

}  // namespace loom::profiler
