// train::GraphedStep (train/loop/graphed_step.h, Note [graphed training step]): on the host, the
// signature it keys graphs by, that every call runs exactly one step, and that it falls
// back to eager steps saying why; on a GPU ("[.cuda]"), replayed steps equal eager ones bit
// for bit, one graph per input shape within its bound.
#include <cmath>

#include "cuda_test_util.h"
#include "test_util.h"

#include "autograd/autocast.h"
#include "core/cuda_emulation.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "train/loop/graphed_step.h"

using namespace loom;
using namespace loom::test;

TEST_CASE("graphed step: the signature names each input's shape, dtype and device", "[graphed_step]") {
  const Tensor a = zeros({2, 3}), b = zeros({4}, TensorOptions(kInt64));
  REQUIRE(train::input_signature({a, b}) == "(2, 3) float32 cpu; (4,) int64 cpu");
  REQUIRE(train::input_signature({a, Tensor()}) == "(2, 3) float32 cpu; undefined");
  REQUIRE(train::input_signature({a}) != train::input_signature({zeros({3, 2})}));
  REQUIRE(train::input_signature({a}) != train::input_signature({zeros({2, 3}, TensorOptions(kFloat64))}));
}

TEST_CASE("graphed step: bad options are ValueErrors", "[graphed_step]") {
  auto f = [](const std::vector<Tensor>& in) { return in[0] * 2.0; };
  REQUIRE_THROWS_AS(train::GraphedStep(nullptr), ValueError);
  REQUIRE_THROWS_WITH(train::GraphedStep(f, train::GraphedStepOptions().with_warmup_steps(0)),
                      Catch::Contains("warmup_steps"));
  REQUIRE_THROWS_AS(train::GraphedStep(f, train::GraphedStepOptions().with_max_graphs(0)), ValueError);
}

namespace {
// A small regression model trained by SGD with momentum, as a step function of (x, y).
struct Regression {
  nn::Linear linear{nn::LinearOptions(6, 3)};
  std::unique_ptr<optim::SGD> opt;
  int steps = 0;  // how often the step ran (host code)
  explicit Regression(Device device) {
    manual_seed(7);
    linear = nn::Linear(nn::LinearOptions(6, 3));
    linear->to(device);
    opt = std::make_unique<optim::SGD>(linear->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  }
  Tensor step(const std::vector<Tensor>& in) {
    ++steps;
    opt->zero_grad();
    Tensor loss = nn::functional::mse_loss(linear(in[0]), in[1]);
    loss.backward();
    opt->step();
    return loss;
  }
  std::vector<float> weights() const { return linear->weight.cpu().to_vector<float>(); }
};

std::vector<std::vector<Tensor>> batches(Device device, int n) {
  std::vector<std::vector<Tensor>> out;
  for (int i = 0; i < n; ++i) {
    const int64_t rows = i % 2 ? 5 : 8;  // two signatures, as a bucketing loader gives
    out.push_back({random_nonzero({rows, 6}).to(device), random_nonzero({rows, 3}).to(device)});
  }
  return out;
}
}  // namespace

TEST_CASE("graphed step: CPU inputs run eagerly, once per call, and say why once", "[graphed_step]") {
  Regression eager(kCPU), graphed(kCPU);
  train::GraphedStep step([&](const std::vector<Tensor>& in) { return graphed.step(in); },
                          train::GraphedStepOptions().with_quiet(true));
  for (const auto& b : batches(kCPU, 6)) {
    const double expected = eager.step(b).item<double>();
    REQUIRE(step(b).item<double>() == expected);
    REQUIRE_FALSE(step.last_replayed());
  }
  REQUIRE(graphed.steps == 6);
  REQUIRE(graphed.weights() == eager.weights());
  REQUIRE(step.graphs() == 0);
  REQUIRE_THAT(step.why_eager(), Catch::Contains("input 0 is on cpu") && Catch::Contains("not on a CUDA device"));
}

TEST_CASE("graphed step: disabled, it never tries to capture", "[graphed_step]") {
  int calls = 0;
  train::GraphedStep step(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        return in[0] + 1.0;
      },
      train::GraphedStepOptions().with_enabled(false));
  for (int i = 0; i < 4; ++i) REQUIRE(step({full({2}, double(i))}).to_vector<float>() == std::vector<float>{float(i + 1), float(i + 1)});
  REQUIRE(calls == 4);
  REQUIRE(step.why_eager().empty());
}

#ifndef LOOM_WITH_CUDA
TEST_CASE("graphed step: on the host-emulated device, capture is refused once and every step still runs once",
          "[graphed_step]") {
  cuda::EmulationGuard emulate;
  Regression eager(kCUDA), graphed(kCUDA);
  train::GraphedStep step([&](const std::vector<Tensor>& in) { return graphed.step(in); },
                          train::GraphedStepOptions().with_warmup_steps(2).with_quiet(true));
  const auto all = batches(kCUDA, 10);
  for (const auto& b : all) REQUIRE(step(b).item<double>() == eager.step(b).item<double>());
  REQUIRE(graphed.steps == 10);  // the refused captures ran no step of their own
  REQUIRE(graphed.weights() == eager.weights());
  REQUIRE(step.captures() == 0);
  REQUIRE_FALSE(step.last_replayed());
  REQUIRE_THAT(step.why_eager(), Catch::Contains("GraphCapture") && Catch::Contains("built without CUDA"));
}
#endif

TEST_CASE("graphed step: replayed steps equal eager steps bit for bit, one graph per input shape", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  Regression eager(kCUDA), graphed(kCUDA);
  train::GraphedStep step([&](const std::vector<Tensor>& in) { return graphed.step(in); },
                          train::GraphedStepOptions().with_warmup_steps(2).with_quiet(true));
  const auto all = batches(kCUDA, 20);
  int replays = 0;
  for (const auto& b : all) {
    const double got = step(b).item<double>();
    replays += step.last_replayed();
    REQUIRE(got == eager.step(b).item<double>());
  }
  INFO(step.why_eager());
  REQUIRE(step.captures() == 2);  // (8, 6) and (5, 6)
  REQUIRE(step.graphs() == 2);
  REQUIRE(replays == 20 - 2 * 2);  // all but each shape's two warm-up steps
  REQUIRE(graphed.steps == 2 * 2 + 2);  // host code: warm-ups and the two captures
  REQUIRE(graphed.weights() == eager.weights());
}

TEST_CASE("graphed step: beyond max_graphs the least recently used shape's graph goes", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  Regression eager(kCUDA), graphed(kCUDA);
  train::GraphedStep step([&](const std::vector<Tensor>& in) { return graphed.step(in); },
                          train::GraphedStepOptions().with_warmup_steps(1).with_max_graphs(1).with_quiet(true));
  // Shapes 8, 8, 5, 5, 8, 8, 5, 5: each return of a shape warms up and captures again.
  std::vector<std::vector<Tensor>> all;
  for (int64_t rows : {8, 8, 5, 5, 8, 8, 5, 5})
    all.push_back({random_nonzero({rows, 6}).to(kCUDA), random_nonzero({rows, 3}).to(kCUDA)});
  for (const auto& b : all) REQUIRE(step(b).item<double>() == eager.step(b).item<double>());
  REQUIRE(step.graphs() == 1);
  REQUIRE(step.captures() == 4);
  REQUIRE(graphed.weights() == eager.weights());
}

TEST_CASE("graphed step: a step with dropout is replayed, drawing the eager steps' masks", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  Regression eager(kCUDA), graphed(kCUDA);
  const auto with_dropout = [](Regression& model, const std::vector<Tensor>& in) {
    return model.step({nn::functional::dropout(in[0], 0.2, /*training=*/true), in[1]});
  };
  const auto all = batches(kCUDA, 8);
  manual_seed(3);
  std::vector<double> eager_losses;
  for (const auto& b : all) eager_losses.push_back(with_dropout(eager, b).item<double>());
  manual_seed(3);  // the same generator counters, now through warm-ups, captures and replays
  train::GraphedStep step([&](const std::vector<Tensor>& in) { return with_dropout(graphed, in); },
                          train::GraphedStepOptions().with_warmup_steps(1).with_quiet(true));
  int replays = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    INFO("step " << i << ": " << step.why_eager());
    REQUIRE(step(all[i]).item<double>() == eager_losses[i]);
    replays += step.last_replayed();
  }
  REQUIRE(step.why_eager().empty());
  REQUIRE(replays == 8 - 2 * 1);
  REQUIRE(graphed.weights() == eager.weights());
}

namespace {
// A small classifier (Embedding -> mean -> Linear) trained by a capturable optimizer of
// `kind`, with an optional GradScaler under float16 autocast: the step a graphed loop runs.
struct Classifier {
  nn::Embedding embedding{nn::EmbeddingOptions(50, 16)};
  nn::Linear fc{nn::LinearOptions(16, 4)};
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::StepLR> schedule;
  amp::GradScaler scaler;
  bool autocast;
  Classifier(const std::string& kind, bool with_scaler)
      : scaler({.enabled = with_scaler}), autocast(with_scaler) {
    manual_seed(17);
    embedding = nn::Embedding(nn::EmbeddingOptions(50, 16));
    fc = nn::Linear(nn::LinearOptions(16, 4));
    embedding->to(kCUDA);
    fc->to(kCUDA);
    std::vector<Tensor> params = embedding->parameters();
    for (const Tensor& p : fc->parameters()) params.push_back(p);
    if (kind == "SGD") opt = std::make_unique<optim::SGD>(params, optim::SGDOptions(0.1).momentum(0.9).capturable(true));
    if (kind == "Adam") opt = std::make_unique<optim::Adam>(params, optim::AdamOptions(0.01).capturable(true));
    if (kind == "AdamW") opt = std::make_unique<optim::AdamW>(params, optim::AdamOptions(0.01).capturable(true));
    if (kind == "RMSprop")
      opt = std::make_unique<optim::RMSprop>(params, optim::RMSpropOptions(0.01).momentum(0.5).capturable(true));
    schedule = std::make_unique<optim::StepLR>(*opt, 5, 0.5);
  }
  Tensor step(const std::vector<Tensor>& in) {  // tokens (B, T), labels (B)
    opt->zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard guard(kCUDA, kFloat16, autocast);
      loss = nn::functional::cross_entropy(fc(embedding(in[0]).mean(1)), in[1]);
    }
    scaler.scale(loss).backward();
    scaler.step(*opt);
    scaler.update();
    return loss.detach();
  }
  std::vector<float> weights() const {
    std::vector<float> w = embedding->weight.cpu().to_vector<float>();
    for (float v : fc->weight.cpu().to_vector<float>()) w.push_back(v);
    return w;
  }
};
}  // namespace

TEST_CASE("graphed step: 20 replayed steps equal 20 eager steps for each optimizer, scaler and scheduler",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (const std::string kind : {"SGD", "Adam", "AdamW", "RMSprop"}) {
    for (bool with_scaler : {false, true}) {
      INFO(kind << (with_scaler ? " with GradScaler and float16 autocast" : ""));
      Classifier eager(kind, with_scaler), graphed(kind, with_scaler);
      train::GraphedStep step([&](const std::vector<Tensor>& in) { return graphed.step(in); },
                              train::GraphedStepOptions().with_quiet(true));
      manual_seed(3);
      for (int i = 0; i < 20; ++i) {
        const std::vector<Tensor> batch = {randint(0, 50, {8, 6}).to(kCUDA), randint(0, 4, {8}).to(kCUDA)};
        const double got = step(batch).item<double>();
        REQUIRE(got == eager.step(batch).item<double>());
        if (i % 4 == 3) {  // the scheduler, outside the step: writes the device learning rate
          eager.schedule->step();
          graphed.schedule->step();
        }
      }
      INFO(step.why_eager());
      REQUIRE(step.captures() == 1);
      REQUIRE(step.last_replayed());
      REQUIRE(graphed.weights() == eager.weights());
      if (with_scaler) REQUIRE(graphed.scaler.get_scale() == eager.scaler.get_scale());
    }
  }
}

TEST_CASE("graphed step: a bad index in a replayed or an eager step is an IndexError at the next sync, then "
          "training goes on", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  Classifier model("Adam", false);
  train::GraphedStep step([&](const std::vector<Tensor>& in) { return model.step(in); },
                          train::GraphedStepOptions().with_quiet(true));
  manual_seed(4);
  const auto good = [] { return std::vector<Tensor>{randint(0, 50, {8, 6}).to(kCUDA), randint(0, 4, {8}).to(kCUDA)}; };
  for (int i = 0; i < 4; ++i) (void)step(good()).item<double>();
  REQUIRE(step.last_replayed());
  for (bool graphed : {true, false}) {
    INFO((graphed ? "replayed" : "eager"));
    std::vector<Tensor> bad = good();
    bad[0] = bad[0].cpu();
    bad[0].narrow(0, 2, 1).narrow(1, 3, 1).fill_(77);  // token 77 of an embedding of 50
    bad[0] = bad[0].to(kCUDA);
    Tensor loss = graphed ? step(bad) : model.step(bad);  // queued: nothing waits
    REQUIRE_THROWS_WITH(loss.item<double>(), Catch::Contains("embedding") && Catch::Contains("77"));
    const double next = step(good()).item<double>();  // the next step works
    REQUIRE(std::isfinite(next));
  }
}
