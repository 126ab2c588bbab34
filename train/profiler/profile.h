// profiler::Profile: where a program spends its time and memory, as torch.profiler.profile.
//
//   profiler::Profile prof({.record_shapes = true, .profile_memory = true});
//   train_step();
//   prof.stop();
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 10});
//   prof.export_chrome_trace("trace.json");  // chrome://tracing, ui.perfetto.dev
//
// Or over a loop, with a schedule and a handler that writes what TensorBoard reads:
//
//   profiler::Profile prof({.schedule = profiler::Schedule{.wait = 1, .warmup = 1, .active = 3},
//                           .on_trace_ready = profiler::tensorboard_trace_handler("runs/profile")});
//   for (auto& batch : loader) { train_step(batch); prof.step(); }
//
// While it records, every op through the kernel router, every autograd node run by backward,
// optimizer steps and zero_grad, the DataLoader's batches and every profiler::Range are
// events (Note [profiler recording] in core/profiler.h), on every thread of the process. One
// Profile records at a time (a second one is a ValueError while the first records). Not
// recording, none of it costs more than a predicted branch. docs/profiling.md shows the table,
// the trace and the timeline page.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/profiler.h"
#include "train/profiler/profile_table.h"

namespace loom::profiler {

// As torch.profiler.schedule(wait, warmup, active) with one cycle: of the steps counted by
// step(), the first `wait` are not recorded, the next `warmup` are recorded and thrown away
// (the recording's first steps pay its one-time costs), the next `active` are kept; then
// recording stops and on_trace_ready runs. Each recorded step is a ProfilerStep#N event.
struct Schedule {
  int64_t wait = 0;
  int64_t warmup = 0;
  int64_t active = 1;
};

class Profile;

struct ProfileOptions {
  bool record_shapes = false;        // the inputs' shapes and dtypes of every op
  bool profile_memory = false;       // the memory every event allocates and frees
  std::optional<Schedule> schedule;  // none: record from construction to stop()
  // Called once when the recording is complete: at the end of the schedule's active steps,
  // or at stop() (and so at destruction).
  std::function<void(Profile&)> on_trace_ready;
};

class Profile {
 public:
  explicit Profile(ProfileOptions options = {});
  // Stops recording; an error of on_trace_ready here is printed, not thrown.
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Ends a step of the schedule (as prof.step()); without a schedule it only counts.
  void step();
  // Ends the recording (idempotent); runs on_trace_ready if it has not run.
  void stop();

  bool is_recording() const { return recording_; }
  int64_t step_num() const { return step_num_; }

  // What was recorded: ValueError while still recording (stop() first).
  const Recording& events() const;
  // Its events' self and total times and memory, computed once when the recording ended and
  // shared by key_averages(), export_html() and the trace handler.
  const Analysis& analysis() const;
  KeyAverages key_averages(bool group_by_input_shape = false) const;
  // The trace in the Trace Event format: chrome://tracing, ui.perfetto.dev, TensorBoard.
  void export_chrome_trace(const std::string& path) const;
  // A self-contained HTML page: the timeline (threads and GPU streams) and the table.
  void export_html(const std::string& path) const;

 private:
  enum class Phase { Idle, Warmup, Active, Done };
  Phase phase_at(int64_t step) const;
  void enter(Phase phase);
  void open_step_event();
  void finish();

  ProfileOptions options_;
  int64_t step_num_ = 0;
  Phase phase_ = Phase::Idle;
  bool recording_ = false;  // a session of core/profiler.h is on for this Profile
  bool handled_ = false;    // on_trace_ready ran
  std::optional<ScopedEvent> step_event_;
  std::optional<Recording> recorded_;
  std::optional<Analysis> analysis_;  // of *recorded_
};

// An on_trace_ready that writes, in `dir`, <worker>.<milliseconds>.pt.trace.json (the files
// TensorBoard's profile plugin lists, torch-tb-profiler), and beside it .timeline.html (the
// timeline page) and .key_averages.txt (the table, every row). worker: "<hostname>_<pid>" by
// default, as PyTorch's.
std::function<void(Profile&)> tensorboard_trace_handler(const std::string& dir, std::string worker_name = "");

}  // namespace loom::profiler
