// --profile DIR for the examples: the training loop under profiler::Profile with a schedule,
// as a PyTorch script wraps its loop in torch.profiler.profile(schedule=...,
// on_trace_ready=tensorboard_trace_handler(DIR)) and calls prof.step() after each step.
//
//   examples::ProfileOption profile;  profile.add_to(app);
//   std::unique_ptr<profiler::Profile> prof = profile.start();  // null without --profile
//   for (...) { train_step(); examples::profile_step(prof); }
//
// Skips --profile-wait steps, warms up for one, records --profile-steps; then writes into DIR
// the trace TensorBoard's profile plugin, Chrome and Perfetto read (*.pt.trace.json), the
// HTML timeline beside it and the table (*.key_averages.txt), and prints the table. A run
// with fewer steps writes what it recorded when the Profile goes.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "loom.h"

namespace examples {

struct ProfileOption {
  std::string dir;  // --profile: empty for none
  int64_t wait = 2;
  int64_t active = 5;

  void add_to(CLI::App& app) {
    app.add_option("--profile", dir,
                   "profile training steps into DIR: a trace for TensorBoard, Chrome and Perfetto, an HTML "
                   "timeline and the table of ops (docs/profiling.md)");
    app.add_option("--profile-steps", active, "steps --profile records")->check(CLI::PositiveNumber);
    app.add_option("--profile-wait", wait, "steps --profile skips first (then one more warms up)")
        ->check(CLI::NonNegativeNumber);
  }

  std::unique_ptr<loom::profiler::Profile> start() const {
    if (dir.empty()) return nullptr;
    const auto write = loom::profiler::tensorboard_trace_handler(dir);
    return std::make_unique<loom::profiler::Profile>(loom::profiler::ProfileOptions{
        .profile_memory = true,
        .schedule = loom::profiler::Schedule{.wait = wait, .warmup = 1, .active = active},
        .on_trace_ready = [write, dir = dir](loom::profiler::Profile& prof) {
          write(prof);
          const loom::profiler::KeyAverages averages = prof.key_averages();
          std::printf("profile: %lld steps, written to %s\n%s", static_cast<long long>(averages.steps().steps),
                      dir.c_str(), averages.table({.sort_by = "self_cpu_time_total", .row_limit = 20}).c_str());
        }});
  }
};

inline void profile_step(const std::unique_ptr<loom::profiler::Profile>& prof) {
  if (prof) prof->step();
}

}  // namespace examples
