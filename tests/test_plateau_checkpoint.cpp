// ReduceLROnPlateau in training checkpoints: a tiny model trained with SGD (momentum, two
// parameter groups) and ReduceLROnPlateau on a metric sequence that triggers reductions,
// cooldowns and the min_lr floor, checkpointed at several epochs and resumed into fresh
// objects: the lrs, the scheduler's counters and options, and the weights equal an
// uninterrupted run's (and a hand-computed schedule) at every later epoch. Plus the
// hostile-state paths: a missing, ill-typed or out-of-range key, another scheduler's
// state, each a ValueError naming the key that leaves the scheduler as it was.
#include <array>

#include "test_util.h"

#include "nn/linear.h"
#include "nn/loss.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

using namespace loom;
using namespace loom::test;

namespace {

// min mode, 1% relative threshold: an epoch is "better" when below 0.99 * best.
const optim::ReduceLROnPlateauOptions kOptions =
    optim::ReduceLROnPlateauOptions().factor(0.5).patience(2).threshold(0.01).cooldown(1).min_lr(0.01);

// One metric per epoch. Epoch 3 (0.7999) misses the threshold; a third bad epoch in a row
// (more than patience = 2) cuts the lr (epochs 5, 9, 13, 17, 21), each cut followed by one
// epoch of cooldown that does not count.
const std::vector<double> kMetrics{1.0, 0.8, 0.7999, 0.85, 0.9, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7,
                                   0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7};

// The lrs of the two groups after each epoch, by hand: halved at each cut, floored at
// min_lr = 0.01 (epoch 17 takes group 0 from 0.0125 to 0.01; at epoch 21 nothing moves).
std::vector<std::array<double, 2>> expected_lrs() {
  std::vector<std::array<double, 2>> lrs;
  std::array<double, 2> lr{0.1, 0.04};
  for (size_t e = 1; e <= kMetrics.size(); ++e) {
    if (e == 5 || e == 9 || e == 13 || e == 17 || e == 21)
      for (double& x : lr) x = std::max(x * 0.5, 0.01);
    lrs.push_back(lr);
  }
  return lrs;
}

// A linear model, SGD with the weight and the bias in groups of their own, and the plateau
// scheduler; `seed` picks the initial weights.
struct Run {
  explicit Run(uint64_t seed, const optim::ReduceLROnPlateauOptions& options = kOptions)
      : model((manual_seed(seed), std::make_shared<nn::LinearImpl>(3, 1))),
        opt({model->weight}, optim::SGDOptions(0.1).momentum(0.9)),
        plateau((opt.add_param_group({model->bias}, 0.04), opt), options) {}

  // Epochs [from, to): one SGD step on (x, y), then the epoch's metric.
  void train(const Tensor& x, const Tensor& y, size_t from, size_t to) {
    for (size_t e = from; e < to; ++e) {
      opt.zero_grad();
      nn::functional::mse_loss(model->forward(x), y).backward();
      opt.step();
      plateau.step(kMetrics[e]);
      after_epoch.push_back(snapshot());
    }
  }

  struct Snapshot {
    std::array<double, 2> lrs;
    double best;
    int64_t num_bad_epochs, cooldown_counter, last_epoch;
    bool operator==(const Snapshot&) const = default;
  };
  Snapshot snapshot() const {
    return {{opt.param_groups()[0].lr, opt.param_groups()[1].lr},
            plateau.best(),
            plateau.num_bad_epochs(),
            plateau.cooldown_counter(),
            plateau.last_epoch()};
  }
  optim::Checkpoint checkpoint(int64_t epoch = 0) { return {model.get(), &opt, &plateau, 0, epoch}; }

  std::shared_ptr<nn::LinearImpl> model;
  optim::SGD opt;
  optim::ReduceLROnPlateau plateau;
  std::vector<Snapshot> after_epoch;
};

std::vector<double> weights_of(const Run& r) {
  std::vector<double> w = r.model->weight.to_vector<double>();
  w.push_back(r.model->bias.item<double>());
  return w;
}

}  // namespace

TEST_CASE("ReduceLROnPlateau resumes from a checkpoint exactly as an uninterrupted run", "[checkpoint][plateau]") {
  TempDir dir;
  manual_seed(5);
  const Tensor x = randn({16, 3}), y = randn({16, 1});
  const size_t n = kMetrics.size();

  Run whole(1);
  whole.train(x, y, 0, n);
  const std::vector<std::array<double, 2>> want = expected_lrs();
  for (size_t e = 0; e < n; ++e) {
    INFO("epoch " << e + 1);
    CHECK(whole.after_epoch[e].lrs == want[e]);
  }
  CHECK(whole.after_epoch[4].cooldown_counter == 1);  // just cut
  CHECK(whole.after_epoch[3].num_bad_epochs == 2);
  CHECK(whole.after_epoch[n - 1].best == 0.7);

  // Mid-patience, just after a cut (in cooldown), after the cooldown, near the floor.
  for (size_t k : {3, 4, 5, 6, 14, 17}) {
    INFO("checkpoint after epoch " << k);
    const std::string path = dir.file("plateau-" + std::to_string(k) + ".safetensors");
    Run first(1);
    first.train(x, y, 0, k);
    optim::save_checkpoint(path, first.checkpoint(int64_t(k)));
    first.train(x, y, k, k + 2);  // what happens after the save must not leak into it

    // Other weights, other lrs and other options: everything must come from the file.
    Run resumed(2, optim::ReduceLROnPlateauOptions().mode("max").factor(0.9).patience(7).threshold_mode("abs"));
    const optim::TrainingState s = optim::load_checkpoint(path, resumed.checkpoint());
    REQUIRE(s.epoch == int64_t(k));
    REQUIRE(resumed.snapshot() == whole.after_epoch[k - 1]);
    CHECK(resumed.plateau.options().mode_ == "min");
    CHECK(resumed.plateau.options().threshold_mode_ == "rel");
    CHECK(resumed.plateau.options().factor_ == 0.5);
    CHECK(resumed.plateau.options().patience_ == 2);
    CHECK(resumed.plateau.options().cooldown_ == 1);
    CHECK(resumed.plateau.options().min_lr_ == 0.01);
    resumed.train(x, y, k, n);
    for (size_t e = k; e < n; ++e) {
      INFO("epoch " << e + 1);
      REQUIRE(resumed.after_epoch[e - k] == whole.after_epoch[e]);
    }
    CHECK(weights_of(resumed) == weights_of(whole));
  }
}

TEST_CASE("ReduceLROnPlateau.load_state_dict rejects a hostile state and leaves the scheduler as it was",
          "[checkpoint][plateau]") {
  TempDir dir;
  const std::string path = dir.file("plateau.safetensors");
  manual_seed(5);
  const Tensor x = randn({16, 3}), y = randn({16, 1});
  Run saved(1);
  saved.train(x, y, 0, 4);
  optim::save_checkpoint(path, saved.checkpoint());
  const optim::StateDict good = saved.plateau.state_dict();

  Run fresh(2);
  fresh.train(x, y, 0, 2);
  const Run::Snapshot before = fresh.snapshot();
  auto expect_rejected = [&](const optim::StateDict& bad, const std::vector<std::string>& parts) {
    require_throws_with<ValueError>([&] { fresh.plateau.load_state_dict(bad); }, parts);
    CHECK(fresh.snapshot() == before);
    CHECK(fresh.plateau.options().factor_ == 0.5);
  };
  for (const auto& [key, value] : good) {
    INFO(key);
    optim::StateDict missing = good;
    missing.erase(key);
    expect_rejected(missing, {"ReduceLROnPlateau.load_state_dict", "missing key '" + key + "'"});
    optim::StateDict ill_typed = good;
    ill_typed[key] = zeros({2}, value.dtype());
    expect_rejected(ill_typed, {"'" + key + "'", "(2,)"});
    ill_typed[key] = scalar_tensor(1, value.dtype() == kInt64 ? kFloat32 : kInt64);
    expect_rejected(ill_typed, {"'" + key + "'", dtype_name(value.dtype())});
  }
  auto with = [&](const std::string& key, const Tensor& value) {
    optim::StateDict s = good;
    s[key] = value;
    return s;
  };
  expect_rejected(with("mode", scalar_tensor(2, kInt64)), {"'mode'", "'min'", "'max'", "got 2"});
  expect_rejected(with("threshold_mode", scalar_tensor(-1, kInt64)), {"'threshold_mode'", "got -1"});
  expect_rejected(with("num_bad_epochs", scalar_tensor(-3, kInt64)), {"'num_bad_epochs'", "non-negative", "-3"});
  expect_rejected(with("best", scalar_tensor(std::nan(""), kFloat64)), {"'best'", "NaN"});
  expect_rejected(with("factor", scalar_tensor(1.5, kFloat64)), {"factor", "< 1", "1.5"});
  expect_rejected(with("patience", scalar_tensor(-1, kInt64)), {"patience", "non-negative"});
  expect_rejected(with("surprise", scalar_tensor(1, kInt64)), {"unexpected keys 'surprise'"});

  // Through the file: another scheduler's state either way round, a SerializationError
  // naming the file, and nothing restored.
  optim::StepLR step_lr(fresh.opt, 3);  // sets the lrs
  const Run::Snapshot with_step_lr = fresh.snapshot();
  require_throws_with<SerializationError>(
      [&] { optim::load_checkpoint(path, {fresh.model.get(), &fresh.opt, &step_lr}); },
      {path, "'scheduler.*'", "LRScheduler.load_state_dict", "unexpected keys", "'best'"});
  CHECK(fresh.snapshot() == with_step_lr);
  const std::string step_path = dir.file("step.safetensors");
  optim::save_checkpoint(step_path, {fresh.model.get(), &fresh.opt, &step_lr});
  require_throws_with<SerializationError>([&] { optim::load_checkpoint(step_path, fresh.checkpoint()); },
                                          {step_path, "ReduceLROnPlateau.load_state_dict", "missing key 'best'"});
}

TEST_CASE("ReduceLROnPlateau rejects a negative patience or cooldown", "[optim][plateau]") {
  Tensor p = zeros({2}).requires_grad_(true);
  optim::SGD sgd({p}, 0.1);
  require_throws_with<ValueError>([&] { optim::ReduceLROnPlateau(sgd, optim::ReduceLROnPlateauOptions().patience(-1)); },
                                  {"ReduceLROnPlateau", "patience", "-1"});
  require_throws_with<ValueError>([&] { optim::ReduceLROnPlateau(sgd, optim::ReduceLROnPlateauOptions().cooldown(-2)); },
                                  {"ReduceLROnPlateau", "cooldown", "-2"});
}
