#include "train/profiler/profile.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "train/profiler/chrome_trace.h"
#include "train/profiler/timeline_html.h"
#include "train/tensorboard/event_file.h"

namespace loom::profiler {

Profile::Profile(ProfileOptions options) : options_(std::move(options)) {
  if (options_.schedule) {
    const Schedule& s = *options_.schedule;
    LOOM_CHECK(s.wait >= 0 && s.warmup >= 0 && s.active >= 1, ValueError,
               "profiler::Schedule: expected wait >= 0, warmup >= 0 and active >= 1, got wait=", s.wait,
               ", warmup=", s.warmup, ", active=", s.active);
  }
  enter(phase_at(0));
  open_step_event();
}

Profile::~Profile() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: profiler::Profile: %s\n", e.what());
  }
}

Profile::Phase Profile::phase_at(int64_t step) const {
  if (!options_.schedule) return Phase::Active;
  const Schedule& s = *options_.schedule;
  if (step < s.wait) return Phase::Idle;
  if (step < s.wait + s.warmup) return Phase::Warmup;
  if (step < s.wait + s.warmup + s.active) return Phase::Active;
  return Phase::Done;
}

// Leaves the current phase (a warmup's recording is dropped, an active one's kept) and
// starts `next`'s.
void Profile::enter(Phase next) {
  if (recording_) {
    recording_ = false;  // even if reading the GPU's events throws: the session is over
    Recording r = detail::stop();
    if (phase_ == Phase::Active) {
      recorded_ = std::move(r);
      analysis_.emplace(analyze(*recorded_));
    }
  }
  phase_ = next;
  if (next == Phase::Warmup || next == Phase::Active) {
    detail::start({.record_shapes = options_.record_shapes, .profile_memory = options_.profile_memory});
    recording_ = true;
  }
  if (next == Phase::Done) finish();
}

// ProfilerStep#N around the step now beginning, while a scheduled Profile records.
void Profile::open_step_event() {
  if (options_.schedule && recording_)
    step_event_.emplace(intern("ProfilerStep#" + std::to_string(step_num_)), EventKind::Step);
}

void Profile::finish() {
  if (handled_ || !recorded_ || !options_.on_trace_ready) return;
  handled_ = true;
  options_.on_trace_ready(*this);
}

void Profile::step() {
  step_event_.reset();
  ++step_num_;
  const Phase next = phase_at(step_num_);
  if (next != phase_) enter(next);
  open_step_event();
}

void Profile::stop() {
  step_event_.reset();
  if (phase_ != Phase::Done) enter(Phase::Done);
}

const Recording& Profile::events() const {
  LOOM_CHECK(!recording_, ValueError, "profiler::Profile: still recording; stop() it (or finish its schedule) first");
  LOOM_CHECK(recorded_.has_value(), ValueError,
             "profiler::Profile: nothing was recorded (the schedule stopped before its active steps)");
  return *recorded_;
}

const Analysis& Profile::analysis() const {
  events();  // the same errors while recording or with nothing recorded
  return *analysis_;
}

KeyAverages Profile::key_averages(bool group_by_input_shape) const {
  return KeyAverages(analysis(), group_by_input_shape);
}

namespace {

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary);
  LOOM_CHECK(f.good(), ValueError, what, ": cannot write '", path, "'");
  f << text;
  f.close();
  LOOM_CHECK(f.good(), ValueError, what, ": writing '", path, "' failed");
}

}  // namespace

void Profile::export_chrome_trace(const std::string& path) const {
  write_file(path, chrome_trace_json(events()), "export_chrome_trace");
}

void Profile::export_html(const std::string& path) const { write_file(path, timeline_html(analysis()), "export_html"); }

std::function<void(Profile&)> tensorboard_trace_handler(const std::string& dir, std::string worker_name) {
  if (worker_name.empty()) worker_name = train::host_name() + "_" + std::to_string(::getpid());
  return [dir, worker_name](Profile& prof) {
    std::filesystem::create_directories(dir);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const std::string stem = dir + "/" + worker_name + "." + std::to_string(ms);
    prof.export_chrome_trace(stem + ".pt.trace.json");
    prof.export_html(stem + ".timeline.html");
    write_file(stem + ".key_averages.txt", prof.key_averages().table(), "tensorboard_trace_handler");
  };
}

}  // namespace loom::profiler
