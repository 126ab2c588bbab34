// libFuzzer target for training-checkpoint restore, optim::load_checkpoint
// (optim/checkpoint.cpp), into a small MLP with three optimizer/scheduler pairs: Adam
// (amsgrad) + StepLR, SGD with momentum + ReduceLROnPlateau, and the model alone. Any file
// must either restore or throw a loom::Error — never crash, overflow, hang, or throw
// anything else. And beyond that (Note [all-or-nothing restore]):
//  - a restore that throws leaves the model, optimizer, scheduler and generator exactly as
//    they were, byte for byte;
//  - one that succeeds leaves what the checks promise: learning rates and step counts
//    non-negative, Adam's averages of squares non-negative and not NaN; the restored state
//    saves and restores to the same bytes; and training goes on from it (a step of the
//    optimizer and of the scheduler) without an error.
//
// Seeds are real checkpoints from save_checkpoint: with LOOM_FUZZ_WRITE_SEEDS=<folder> the
// binary writes them there and exits (scripts/fuzz.sh does this before fuzzing).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "core/factories.h"
#include "core/generator.h"
#include "core/safetensors.h"
#include "fuzz_util.h"
#include "nn/activation.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

using namespace loom;

namespace {

enum class Kind { AdamStepLR, SgdPlateau, ModelOnly };
constexpr Kind kKinds[] = {Kind::AdamStepLR, Kind::SgdPlateau, Kind::ModelOnly};

// A model with its optimizer and scheduler, made the same way every time (the generator
// is reseeded first), after `steps` training steps.
struct Setup {
  explicit Setup(Kind kind, int steps = 1) {
    default_generator().manual_seed(0);
    model = nn::Sequential(nn::Linear(3, 4), nn::Tanh(), nn::Linear(4, 2));
    if (kind == Kind::AdamStepLR) {
      auto adam = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(1e-2).amsgrad(true));
      scheduler = std::make_unique<optim::StepLR>(*adam, 2, 0.5);
      optimizer = std::move(adam);
    } else if (kind == Kind::SgdPlateau) {
      auto sgd = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
      plateau = std::make_unique<optim::ReduceLROnPlateau>(*sgd, optim::ReduceLROnPlateauOptions().patience(1));
      optimizer = std::move(sgd);
    }
    for (int i = 0; i < steps; ++i) train_step();
  }

  void train_step() {
    const Tensor x = from_vector(std::vector<float>{0.5f, -1.f, 2.f, 1.f, 0.f, -0.5f}, {2, 3});
    if (optimizer) optimizer->zero_grad();
    const Tensor loss = model(x).pow(2).mean();
    loss.backward();
    if (optimizer) optimizer->step();
    if (scheduler) scheduler->step();
    if (plateau) plateau->step(loss.item<double>());
  }

  optim::Scheduler* any_scheduler() const {
    return scheduler ? static_cast<optim::Scheduler*>(scheduler.get()) : plateau.get();
  }
  optim::Checkpoint checkpoint(int64_t step = 0, int64_t epoch = 0) const {
    return {model.ptr().get(), optimizer.get(), any_scheduler(), step, epoch};
  }

  // Every byte a restore may change, as one string: each entry's name, dtype, shape and
  // data (by hand: serialize_safetensors would take most of the fuzzer's time).
  std::string snapshot() const {
    std::string out;
    const auto add = [&](const std::string& prefix, const auto& state) {
      for (const auto& [key, value] : state) {
        const Tensor t = value.contiguous();
        out += prefix + key + " " + dtype_name(t.dtype()) + " " + shape_str(t.sizes()) + " ";
        out.append(static_cast<const char*>(t.data()), t.nbytes());
      }
    };
    add("model.", model->state_dict());
    if (optimizer) add("optimizer.", optimizer->state_dict());
    if (const optim::Scheduler* s = any_scheduler()) add("scheduler.", s->state_dict());
    out += " rng " + std::to_string(default_generator().seed()) + " " + std::to_string(default_generator().offset());
    return out;
  }

  nn::Sequential model = nullptr;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LRScheduler> scheduler;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau;
};

// What a successful restore promises about the optimizer's state.
void check_restored_state(const optim::Optimizer& optimizer) {
  for (const optim::ParamGroup& g : optimizer.param_groups()) FUZZ_CHECK(g.lr >= 0 && g.initial_lr >= 0);
  for (const auto& [key, t] : optimizer.state_dict()) {
    if (key == "step" || key.ends_with(".step")) FUZZ_CHECK(t.item<int64_t>() >= 0);
    if (key.ends_with("exp_avg_sq"))  // also max_exp_avg_sq; NaN fails ge(0) too
      FUZZ_CHECK(t.ge(0).to(kInt64).sum().item<int64_t>() == t.numel());
  }
}

void write_seeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const Kind kind : kKinds)
    for (const int steps : {0, 1, 3}) {
      const Setup s(kind, steps);
      const std::string name = "kind" + std::to_string(int(kind)) + "-steps" + std::to_string(steps);
      optim::save_checkpoint(dir + "/" + name + ".safetensors", s.checkpoint(steps, steps / 2));
    }
  // Counts at the end of int64, which mutations rarely reach: the next step overflowed.
  SafetensorsFile f = load_safetensors(dir + "/kind0-steps1.safetensors");
  f.tensors["optimizer.state.0.step"] = scalar_tensor(std::numeric_limits<int64_t>::max(), kInt64);
  f.tensors["scheduler.last_epoch"] = scalar_tensor(std::numeric_limits<int64_t>::max(), kInt64);
  save_safetensors(dir + "/kind0-int64-max-counts.safetensors", f.tensors, f.metadata);
  // A weights-only file, which load_checkpoint refuses by its metadata.
  optim::save_weights(dir + "/weights.safetensors", *Setup(Kind::ModelOnly).model);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("LOOM_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::printf("fuzz_checkpoint: wrote the seed checkpoints to %s\n", dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::input_file(data, size, "input.safetensors");
  for (const Kind kind : kKinds) {
    Setup s(kind);
    const std::string before = s.snapshot();
    optim::TrainingState state;
    try {
      state = optim::load_checkpoint(path, s.checkpoint());
    } catch (const Error&) {
      FUZZ_CHECK(s.snapshot() == before);  // all or nothing
      continue;
    }
    if (s.optimizer) check_restored_state(*s.optimizer);

    // The restored state round-trips through a file...
    const std::string copy = fuzz::scratch_file("restored.safetensors");
    optim::save_checkpoint(copy, s.checkpoint(state.step, state.epoch));
    Setup again(kind);
    const optim::TrainingState state_again = optim::load_checkpoint(copy, again.checkpoint());
    FUZZ_CHECK(state_again.step == state.step && state_again.epoch == state.epoch);
    FUZZ_CHECK(again.snapshot() == s.snapshot());
    // ...and training goes on from it.
    s.train_step();
  }
  return 0;
}
