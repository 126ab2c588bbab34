// train::EarlyStopping: the best epoch, patience and min_delta in both modes, its state
// through a training checkpoint (optim::Checkpoint::extra), and hostile state refused.
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

// Feeds values to a stopper until it says stop; returns the epochs it said were best and
// the epoch it stopped after (0: never).
std::pair<std::vector<int64_t>, int64_t> run(train::EarlyStopping& s, const std::vector<double>& values) {
  std::vector<int64_t> best;
  for (double v : values) {
    if (s.step(v)) best.push_back(s.epochs());
    if (s.should_stop()) return {best, s.epochs()};
  }
  return {best, 0};
}

}  // namespace

TEST_CASE("EarlyStopping: the best epoch, patience and min_delta, mode min and max", "[early_stopping]") {
  SECTION("min: a held-out loss that rises after epoch 2") {
    train::EarlyStopping s(2, 0.0, "min");
    auto [best, stopped] = run(s, {0.9, 0.7, 0.75, 0.72, 0.6});
    CHECK(best == std::vector<int64_t>{1, 2});
    CHECK(stopped == 4);  // epochs 3 and 4 did not improve on 0.7
    CHECK(s.best_epoch() == 2);
    CHECK(*s.best() == 0.7);
    CHECK(s.epochs_since_best() == 2);
  }
  SECTION("max with min_delta: an improvement must be larger than min_delta") {
    train::EarlyStopping s(3, 0.01, "max");
    auto [best, stopped] = run(s, {0.50, 0.505, 0.52, 0.525, 0.529, 0.54});
    CHECK(best == std::vector<int64_t>{1, 3, 6});  // +0.005 and +0.009 are not enough
    CHECK(stopped == 0);
    CHECK(s.best_epoch() == 6);
  }
  SECTION("patience 0 stops at the first epoch that does not improve; equal is not better") {
    train::EarlyStopping s(0, 0.0, "min");
    auto [best, stopped] = run(s, {1.0, 0.5, 0.5});
    CHECK(best == std::vector<int64_t>{1, 2});
    CHECK(stopped == 3);
  }
  SECTION("a NaN epoch never improves, even the first") {
    train::EarlyStopping s(5, 0.0, "max");
    CHECK_FALSE(s.step(NAN));
    CHECK_FALSE(s.best().has_value());
    CHECK(s.best_epoch() == 0);
    CHECK(s.step(0.3));
    CHECK_FALSE(s.step(NAN));
    CHECK(s.best_epoch() == 2);
    CHECK(s.epochs_since_best() == 1);
  }
  require_throws_with<ValueError>([] { train::EarlyStopping(-1); }, {"EarlyStopping", "patience", "-1"});
  require_throws_with<ValueError>([] { train::EarlyStopping(1, -0.1); }, {"min_delta", "-0.1"});
  require_throws_with<ValueError>([] { train::EarlyStopping(1, NAN); }, {"min_delta", "finite"});
  require_throws_with<ValueError>([] { train::EarlyStopping(1, 0, "lowest"); }, {"mode", "\"min\" or \"max\"", "lowest"});
}

TEST_CASE("EarlyStopping's state goes through a training checkpoint, and a resumed run decides the same",
          "[early_stopping]") {
  const std::vector<double> values{0.8, 0.6, 0.65, 0.55, 0.58, 0.59, 0.57};
  train::EarlyStopping straight(2);
  auto [best_straight, stopped_straight] = run(straight, values);
  REQUIRE(stopped_straight == 6);

  // Three epochs, a checkpoint, then a fresh stopper resumes from it.
  TempDir dir;
  const std::string path = dir.file("early_stopping.safetensors");
  {
    train::EarlyStopping first(2);
    for (size_t i = 0; i < 3; ++i) first.step(values[i]);
    nn::Linear model(3, 2);
    optim::StateDict extra = first.state_dict();
    optim::save_checkpoint(path, {.model = model.ptr().get(), .epoch = 3, .extra = &extra});
  }
  nn::Linear model(3, 2);
  optim::StateDict extra{{"stale", scalar_tensor(1.0, kFloat64)}};
  optim::load_checkpoint(path, {.model = model.ptr().get(), .extra = &extra});
  CHECK_FALSE(extra.contains("stale"));  // replaced by the file's entries
  train::EarlyStopping resumed(2);
  resumed.load_state_dict(extra);
  CHECK(resumed.epochs() == 3);
  CHECK(resumed.best_epoch() == 2);
  auto [best_rest, stopped_rest] = run(resumed, std::vector<double>(values.begin() + 3, values.end()));
  CHECK(best_rest == std::vector<int64_t>{4});
  CHECK(stopped_rest == stopped_straight);
  CHECK(resumed.best_epoch() == straight.best_epoch());
  CHECK(*resumed.best() == *straight.best());
}

TEST_CASE("EarlyStopping.load_state_dict refuses bad state and changes nothing", "[early_stopping]") {
  train::EarlyStopping source(3);
  source.step(0.5);
  source.step(0.7);
  const optim::StateDict good = source.state_dict();
  auto with = [&](const std::string& key, Tensor value) {
    optim::StateDict s = good;
    s[key] = std::move(value);
    return s;
  };
  optim::StateDict missing;
  for (const auto& [k, v] : good)
    if (k != "best") missing[k] = v;
  const std::vector<std::pair<optim::StateDict, std::vector<std::string>>> cases{
      {missing, {"missing key 'best'"}},
      {with("best", scalar_tensor(1.0, kFloat32)), {"'best'", "float64", "float32"}},
      {with("best", scalar_tensor(NAN, kFloat64)), {"'best' is NaN"}},
      {with("epochs", scalar_tensor(-2, kInt64)), {"'epochs'", "non-negative"}},
      {with("mode", scalar_tensor(1, kInt64)), {"'mode' is 1", "\"max\"", "this one's is \"min\""}},
      {with("epochs_since_best", scalar_tensor(5, kInt64)), {"inconsistent counts", "epochs_since_best 5"}},
      {with("surprise", scalar_tensor(0, kInt64)), {"unexpected keys 'surprise'"}},
  };
  train::EarlyStopping target(3);
  target.step(0.2);
  for (const auto& [state, parts] : cases) {
    require_throws_with<ValueError>([&] { target.load_state_dict(state); }, parts);
    CHECK(target.epochs() == 1);
    CHECK(*target.best() == 0.2);
  }
  target.load_state_dict(good);
  CHECK(target.epochs() == 2);
  CHECK(target.best_epoch() == 1);
  CHECK(target.epochs_since_best() == 1);
}
