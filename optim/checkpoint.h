// Training checkpoints: model weights, optimizer state, scheduler state, step/epoch and
// the random generator's state (and a GradScaler's) in one safetensors file (core/safetensors.h), written
// atomically. Resuming from one continues training bit-identically on the CPU.
//
//   optim::save_checkpoint("ckpt.safetensors", {model, &opt, &sched, step, epoch});
//   optim::TrainingState s = optim::load_checkpoint("ckpt.safetensors", {model, &opt, &sched});
//
// The scheduler is any optim::Scheduler: a closed-form LRScheduler or ReduceLROnPlateau
// (its best value, counters and options; the lrs themselves are the optimizer's state).
//
// Model weights are stored under "model.<PyTorch name>"; save_weights/load_weights store
// them under their plain names, which PyTorch's load_state_dict reads directly.
#pragma once

#include <functional>
#include <string>

#include "core/safetensors.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace loom::optim {

struct Checkpoint {
  nn::Module* model = nullptr;
  Optimizer* optimizer = nullptr;    // optional
  Scheduler* scheduler = nullptr;    // optional: an LRScheduler or ReduceLROnPlateau
  int64_t step = 0;
  int64_t epoch = 0;
  amp::GradScaler* scaler = nullptr;  // optional: mixed precision's loss scale
  // optional: any other named state (entries "extra.<key>"), such as a train::EarlyStopping's
  // state_dict(). save_checkpoint writes *extra; load_checkpoint replaces *extra with the
  // file's extra.* entries (none: empty), for the caller to check and load.
  StateDict* extra = nullptr;
  // optional: checks the file's extra.* entries (throwing ValueError) before load_checkpoint
  // changes anything, so that a bad one leaves everything as it was (an EarlyStopping's
  // check_state_dict).
  std::function<void(const StateDict&)> check_extra;
};

struct TrainingState {
  int64_t step = 0;
  int64_t epoch = 0;
};

void save_checkpoint(const std::string& path, const Checkpoint& c);
// Restores into c's model/optimizer/scheduler (those given) and the global generator;
// returns the step and epoch. All or nothing: every entry is checked before anything
// changes, so a failed load leaves the model, optimizer, scheduler, scaler and generator as they
// were. Throws SerializationError naming the file and the key for a bad file (an
// unexpected entry, a meta entry that is not an int64 scalar, an optimizer or scheduler
// entry that is missing or out of range, as their load_state_dict check it; a meta count
// (step, epoch, rng_offset) outside [0, 2^62]; a version other than "1") and
// ValueError when the file does not fit the model (missing/unexpected/mis-shaped keys,
// listed).
TrainingState load_checkpoint(const std::string& path, const Checkpoint& c);

// Weights only, PyTorch-compatible names (model.state_dict()).
void save_weights(const std::string& path, const nn::Module& model);
void load_weights(const std::string& path, nn::Module& model, bool strict = true);

}  // namespace loom::optim
