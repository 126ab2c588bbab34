// Every field of a training checkpoint checked against its domain: for each one, a real
// checkpoint (a linear model trained a few steps with Adam, a scheduler, a GradScaler and
// an EarlyStopping in extra.*) is saved, the field is rewritten with a value outside its
// domain, and load_checkpoint must throw SerializationError naming the file and the field,
// leaving the model, the optimizer, the scheduler, the scaler, the stopper and the
// generator bit for bit as they were. The good file then loads into the same objects.
#include <cfloat>
#include <memory>

#include "test_util.h"

#include "core/safetensors.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "train/loop/early_stopping.h"

using namespace loom;
using namespace loom::test;

namespace {

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data()), size_t(c.nbytes()));
}

std::map<std::string, std::string> bytes_of(const optim::StateDict& state, const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (const auto& [key, t] : state) out[prefix + key] = bytes_of(t);
  return out;
}

// A model with everything a training checkpoint restores; `seed` picks the weights and the
// data, `plateau` the scheduler (ReduceLROnPlateau, else OneCycleLR).
struct Rig {
  Rig(uint64_t seed, bool plateau)
      : model((manual_seed(seed), std::make_shared<nn::LinearImpl>(4, 3))),
        opt(model->parameters(), optim::AdamOptions(0.05)),
        scaler({.init_scale = 256.0, .growth_interval = 3}),
        stopper(2, 0.0, "min") {
    if (plateau) sched = std::make_unique<optim::ReduceLROnPlateau>(opt, optim::ReduceLROnPlateauOptions().patience(1));
    else sched = std::make_unique<optim::OneCycleLR>(opt, optim::OneCycleOptions(0.1, 10).cycle_momentum(false));
    const Tensor x = random_nonzero({8, 4}), y = random_nonzero({8, 3});
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      const Tensor loss = nn::functional::mse_loss(model->forward(x), y);
      scaler.scale(loss).backward();
      scaler.step(opt);
      scaler.update();
      if (auto* p = dynamic_cast<optim::ReduceLROnPlateau*>(sched.get())) p->step(loss.item<double>());
      else static_cast<optim::OneCycleLR*>(sched.get())->step();
      stopper.step(loss.item<double>());
    }
  }
  optim::Checkpoint checkpoint() {
    stopper_state = stopper.state_dict();
    return {model.get(), &opt, sched.get(), 9, 2, &scaler, &stopper_state,
            [this](const optim::StateDict& s) { stopper.check_state_dict(s); }};
  }
  // Everything a load may change, as bytes.
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> out = bytes_of(model->state_dict(), "model.");
    out.merge(bytes_of(opt.state_dict(), "optimizer."));
    out.merge(bytes_of(sched->state_dict(), "scheduler."));
    out.merge(bytes_of(scaler.state_dict(), "scaler."));
    out.merge(bytes_of(stopper.state_dict(), "stopper."));
    out["lr"] = std::to_string(opt.lr());
    out["rng"] = std::to_string(default_generator().seed()) + "/" + std::to_string(default_generator().offset());
    return out;
  }

  std::shared_ptr<nn::LinearImpl> model;
  optim::Adam opt;
  amp::GradScaler scaler;
  train::EarlyStopping stopper;
  std::unique_ptr<optim::Scheduler> sched;
  optim::StateDict stopper_state;
};

struct Case {
  std::string key;  // the file's entry
  Tensor value;
  std::string why;  // a part of the message
};

Tensor real(double v) { return scalar_tensor(v, kFloat64); }
Tensor integer(int64_t v) { return scalar_tensor(v, kInt64); }

// Writes each case's value into the good checkpoint of a Rig(3, plateau) and loads it into
// a differently trained Rig(5, plateau).
void require_each_rejected(bool plateau, const std::vector<Case>& cases) {
  TempDir dir;
  const std::string path = dir.file("good.safetensors");
  Rig saved(3, plateau);
  optim::save_checkpoint(path, saved.checkpoint());
  const SafetensorsFile good = load_safetensors(path);
  Rig target(5, plateau);
  manual_seed(77);
  const auto before = target.snapshot();
  for (const Case& c : cases) {
    INFO(c.key << ": " << c.why);
    REQUIRE(good.tensors.count(c.key));  // a field the checkpoint really has
    TensorMap tensors = good.tensors;
    tensors[c.key] = c.value;
    const std::string bad = dir.file("bad.safetensors");
    save_safetensors(bad, tensors, good.metadata);
    const std::string field = c.key.substr(c.key.find('.') + 1);
    require_throws_with<SerializationError>([&] { optim::load_checkpoint(bad, target.checkpoint()); },
                                            {"load_checkpoint", bad, field, c.why});
    REQUIRE(target.snapshot() == before);
  }
  // The untouched file loads into the same objects.
  optim::load_checkpoint(path, target.checkpoint());
  target.stopper.load_state_dict(target.stopper_state);
  REQUIRE(target.snapshot() == saved.snapshot());
}

}  // namespace

TEST_CASE("checkpoint fields: meta counts and the file's version", "[checkpoint][fields]") {
  require_each_rejected(false, {
      {"meta.step", integer(-1), "[0, 2^62], got -1"},
      {"meta.step", integer(INT64_MAX), "[0, 2^62]"},
      {"meta.epoch", integer(-4), "[0, 2^62], got -4"},
      {"meta.epoch", integer((int64_t(1) << 62) + 1), "[0, 2^62]"},
      {"meta.rng_offset", integer(-8), "[0, 2^62], got -8"},
  });
  // The format's version: only "1" exists.
  TempDir dir;
  Rig saved(3, false), target(5, false);
  const std::string path = dir.file("v.safetensors");
  optim::save_checkpoint(path, saved.checkpoint());
  SafetensorsFile f = load_safetensors(path);
  const auto before = target.snapshot();
  for (const std::string version : {"2", "", "01"}) {
    f.metadata["version"] = version;
    save_safetensors(path, f.tensors, f.metadata);
    require_throws_with<SerializationError>([&] { optim::load_checkpoint(path, target.checkpoint()); },
                                            {path, "'version' must be \"1\"", "\"" + version + "\""});
    REQUIRE(target.snapshot() == before);
  }
  f.metadata.erase("version");
  save_safetensors(path, f.tensors, f.metadata);
  require_throws_with<SerializationError>([&] { optim::load_checkpoint(path, target.checkpoint()); },
                                          {path, "'version'", "got none"});
  REQUIRE(target.snapshot() == before);
  // Any int64 is a seed (a uint64's bits): a negative one loads.
  f.metadata["version"] = "1";
  f.tensors["meta.rng_seed"] = integer(-3);
  save_safetensors(path, f.tensors, f.metadata);
  optim::load_checkpoint(path, target.checkpoint());
  REQUIRE(default_generator().seed() == uint64_t(int64_t(-3)));
}

TEST_CASE("checkpoint fields: the optimizer's learning rates, counts and buffers", "[checkpoint][fields]") {
  const Tensor w = Rig(3, false).opt.state_dict().at("state.0.exp_avg").clone();  // (3, 4), as in the file
  Tensor with_inf = w.clone(), with_nan = w.clone();
  with_inf.data_ptr<float>()[5] = INFINITY;
  with_nan.data_ptr<float>()[2] = NAN;
  Tensor sq_inf = w.abs();
  sq_inf.data_ptr<float>()[0] = INFINITY;
  require_each_rejected(false, {
      {"optimizer.param_groups.0.lr", real(INFINITY), "finite non-negative learning rate, got inf"},
      {"optimizer.param_groups.0.lr", real(-0.5), "got -0.5"},
      {"optimizer.param_groups.0.lr", real(NAN), "got nan"},
      {"optimizer.param_groups.0.initial_lr", real(INFINITY), "got inf"},
      {"optimizer.param_groups.0.initial_lr", real(-1e-3), "learning rate"},
      {"optimizer.step", integer(-2), "non-negative count, got -2"},
      {"optimizer.state.1.step", integer(-1), "non-negative count, got -1"},
      {"optimizer.state.0.exp_avg", with_inf, "infinite or NaN"},
      {"optimizer.state.0.exp_avg", with_nan, "infinite or NaN"},
      {"optimizer.state.0.exp_avg_sq", sq_inf, "infinite or NaN"},
      {"optimizer.state.0.exp_avg_sq", -w.abs() - 1.0f, "negative or NaN"},
  });
}

TEST_CASE("checkpoint fields: OneCycleLR's and ReduceLROnPlateau's state", "[checkpoint][fields]") {
  require_each_rejected(false, {
      {"scheduler.last_epoch", integer(-1), "non-negative, got -1"},
      {"scheduler.last_epoch", integer(11), "at most total_steps = 10, got 11"},
  });
  require_each_rejected(true, {
      {"scheduler.last_epoch", integer(-3), "non-negative, got -3"},
      {"scheduler.num_bad_epochs", integer(-1), "non-negative"},
      {"scheduler.cooldown_counter", integer(-1), "non-negative"},
      {"scheduler.best", real(NAN), "NaN"},
      {"scheduler.mode", integer(2), "got 2"},
      {"scheduler.threshold_mode", integer(-1), "got -1"},
      {"scheduler.factor", real(1.5), "< 1, got 1.5"},
      {"scheduler.factor", real(-0.5), "non-negative, got -0.5"},
      {"scheduler.factor", real(NAN), "factor"},
      {"scheduler.patience", integer(-1), "non-negative"},
      {"scheduler.cooldown", integer(-2), "non-negative"},
      {"scheduler.min_lr", real(-1e-4), "finite and non-negative"},
      {"scheduler.min_lr", real(INFINITY), "finite and non-negative, got inf"},
      {"scheduler.threshold", real(-0.1), "finite and non-negative"},
      {"scheduler.threshold", real(INFINITY), "finite and non-negative"},
      {"scheduler.eps", real(-1.0), "finite and non-negative"},
      {"scheduler.eps", real(NAN), "is NaN"},
  });
}

TEST_CASE("checkpoint fields: the GradScaler's scale, factors, interval and tracker", "[checkpoint][fields]") {
  require_each_rejected(false, {
      {"scaler.scale", real(-1.0), "positive finite float32 number, got -1"},
      {"scaler.scale", real(0.0), "positive"},
      {"scaler.scale", real(INFINITY), "got inf"},
      {"scaler.scale", real(NAN), "got nan"},
      {"scaler.scale", real(double(FLT_MAX) * 2), "float32"},
      {"scaler.growth_factor", real(1.0), "greater than 1"},
      {"scaler.growth_factor", real(INFINITY), "greater than 1"},
      {"scaler.backoff_factor", real(0.0), "(0, 1)"},
      {"scaler.backoff_factor", real(1.0), "(0, 1)"},
      {"scaler.backoff_factor", real(NAN), "(0, 1)"},
      {"scaler.growth_interval", integer(0), "[1, 2^31)"},
      {"scaler._growth_tracker", integer(-1), "[0, growth_interval = 3), got -1"},
      {"scaler._growth_tracker", integer(3), "got 3"},
  });
}

TEST_CASE("checkpoint fields: an EarlyStopping's state in extra.*", "[checkpoint][fields]") {
  require_each_rejected(false, {
      {"extra.best", real(NAN), "NaN"},
      {"extra.best_epoch", integer(-1), "non-negative"},
      {"extra.epochs", integer(-1), "non-negative"},
      {"extra.epochs_since_best", integer(-2), "non-negative"},
      {"extra.epochs", integer(1), "inconsistent counts"},
      {"extra.mode", integer(1), "'mode' is 1"},
  });
}
