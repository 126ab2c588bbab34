// --resume for the examples: a checkpoint to continue from, or `auto`, and what a stop asked
// for by SIGTERM or SIGUSR1 writes (docs/distributed.md, "Restarts" and "Preemption").
//
//   --checkpoint run.safetensors --resume auto   # continue from run.safetensors if it exists
//
// `--resume auto`, and any run torchrun restarted (TORCHELASTIC_RESTART_COUNT > 0), resumes
// from the --checkpoint file when there is one, else starts from scratch. That file is
// always whole: checkpoints are written to a temporary file and renamed over it, so a run
// killed while writing leaves the previous one (and a temporary file no reader takes). It may
// stop mid-epoch (a preempted run's): it then holds the micro-batches the epoch had consumed
// and their totals (entries extra.position.*), and the resumed run skips exactly those, in
// the same shuffled order, so that it ends with the weights of a run never stopped.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "distributed_option.h"
#include "loom.h"
#include "training_loop.h"

namespace examples {

struct ResumeOption {
  std::string value;  // --resume: a checkpoint, "auto", or empty

  void add_to(CLI::App& app) {
    app.add_option("--resume", value,
                   "continue from this checkpoint; 'auto': from --checkpoint's file if it exists "
                   "(also what a run torchrun restarted does)");
  }

  // The checkpoint to continue from, or empty for a fresh start. Checked before any work:
  // `auto` needs --checkpoint (a ValueError otherwise).
  std::string path(const std::string& checkpoint) const {
    const int restarts = restart_count();
    if (value != "auto" && !(value.empty() && restarts > 0)) return value;
    if (checkpoint.empty()) {
      LOOM_CHECK(value != "auto", loom::ValueError,
                 "--resume auto: resumes from the --checkpoint file, and no --checkpoint was given");
      std::fprintf(stderr, "restart %d (TORCHELASTIC_RESTART_COUNT): no --checkpoint to resume from, starting over\n",
                   restarts);
      return "";
    }
    if (std::filesystem::exists(checkpoint)) return checkpoint;
    std::printf("no checkpoint at %s yet: starting from scratch\n", checkpoint.c_str());
    return "";
  }

  // TORCHELASTIC_RESTART_COUNT: how many times torchrun restarted this job's workers (0: unset).
  static int restart_count() {
    const char* v = std::getenv("TORCHELASTIC_RESTART_COUNT");
    if (v == nullptr || *v == '\0') return 0;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    LOOM_CHECK(*end == '\0' && n >= 0 && n < (1L << 30), loom::ValueError,
               "TORCHELASTIC_RESTART_COUNT must be a count, got \"", v, "\"");
    return int(n);
  }
};

// Where a stopped run writes its checkpoint: --checkpoint's file, else (so that the work is
// not lost) `fallback`, which the run then names for --resume.
inline std::string preemption_checkpoint(const std::string& checkpoint, const std::string& fallback) {
  return checkpoint.empty() ? fallback : checkpoint;
}

// A mid-epoch position as a checkpoint's extra entries (position.*), and back. take_position
// removes them from `extra` (leaving what else it holds, an EarlyStopping's state) and
// checks them against an epoch of `batches_per_epoch` and the forward's `statistics`: a
// SerializationError naming the file and the entry otherwise.
inline void put_position(loom::optim::StateDict& extra, const EpochPosition& p) {
  extra["position.batches"] = loom::scalar_tensor(int64_t(p.batches), loom::kInt64);
  extra["position.sums"] = loom::from_vector(p.totals.sums);  // float64
  extra["position.seen"] = loom::scalar_tensor(p.totals.seen, loom::kFloat64);
  extra["position.loader_seed"] = loom::scalar_tensor(int64_t(p.loader_seed), loom::kInt64);  // 63 bits
}

inline std::optional<EpochPosition> take_position(loom::optim::StateDict& extra, size_t batches_per_epoch,
                                                  size_t statistics, const std::string& file) {
  // Takes one entry out of extra: its tensor, or an undefined one when absent.
  const auto take = [&](const std::string& key) {
    auto it = extra.find(key);
    if (it == extra.end()) return loom::Tensor();
    loom::Tensor t = it->second;
    extra.erase(key);
    return t;
  };
  const loom::Tensor b = take("position.batches"), s = take("position.sums"), w = take("position.seen"),
                     seed = take("position.loader_seed");
  if (!b.defined() && !s.defined() && !w.defined() && !seed.defined()) return std::nullopt;  // at an epoch's end
  const auto bad = [&](const std::string& why) {
    throw loom::SerializationError("resume: " + file + ": " + why);
  };
  if (!b.defined() || !s.defined() || !w.defined() || !seed.defined())
    bad("extra.position.batches, .sums, .seen and .loader_seed come together; some are missing");
  if (seed.dim() != 0 || seed.dtype() != loom::kInt64 || seed.item<int64_t>() < 0)
    bad("extra.position.loader_seed must be an int64 scalar >= 0 (a DataLoader pass's 63-bit base seed)");
  if (b.dim() != 0 || b.dtype() != loom::kInt64) bad("extra.position.batches is not an int64 scalar");
  const int64_t n = b.item<int64_t>();
  if (n < 0 || size_t(n) > batches_per_epoch)
    bad("extra.position.batches is " + std::to_string(n) + ", outside an epoch of " +
        std::to_string(batches_per_epoch) + " batches (another data set or batch size?)");
  if (s.dim() != 1 || s.dtype() != loom::kFloat64 || s.size(0) != int64_t(statistics) || w.dim() != 0 ||
      w.dtype() != loom::kFloat64)
    bad("extra.position.sums must be float64 of shape (" + std::to_string(statistics) +
        ") and extra.position.seen a float64 scalar");
  EpochPosition p{size_t(n), {s.to_vector<double>(), w.item<double>()}, uint64_t(seed.item<int64_t>())};
  if (!(p.totals.seen >= 0)) bad("extra.position.seen must be a count >= 0");
  return p;
}

// A stopped run's checkpoint: the epoch's position, its totals summed over the ranks (a
// resumed rank 0 goes on from them, the others from zero), written by rank 0 through
// write(position) while the others wait. Says what happened; returns the exit status.
template <typename Write>
int save_stopped(TrainingLoop& loop, const DistributedOption& dist, const loom::train::PreemptionGuard& preemption,
                 const std::string& path, Write write) {
  const auto start = std::chrono::steady_clock::now();
  EpochPosition at = loop.position();
  std::vector<double> totals = at.totals.sums;
  totals.push_back(at.totals.seen);
  dist.sum(totals);
  at.totals.seen = totals.back();
  totals.pop_back();
  at.totals.sums = totals;
  if (dist.is_main()) write(at);
  dist.barrier();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int sig = preemption.signal();
  std::printf("stopped by %s after step %lld (epoch %lld, batch %zu): checkpoint %s written in %.3f s; "
              "go on with --resume %s; exiting %d\n",
              sig ? loom::train::preemption_signal_name(sig) : "another rank's signal",
              static_cast<long long>(loop.steps()), static_cast<long long>(loop.epoch() + 1), at.batches,
              path.c_str(), seconds, path.c_str(), loom::train::kPreemptedExitCode);
  std::fflush(stdout);
  return loom::train::kPreemptedExitCode;
}

}  // namespace examples
