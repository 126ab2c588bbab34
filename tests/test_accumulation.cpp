// Gradient accumulation (train/loop/gradient_accumulation.h): K micro-batches of B train as one
// batch of K·B — the same gradients at every optimizer step, to 1e-6 in float64, with and
// without the GradScaler, and for the epoch's last, shorter group.
#include "random_texts.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

// The flagship's model (Embedding -> LSTM -> Linear over each text's last state), without
// dropout, so a batch's loss depends on its texts only.
struct Classifier : nn::Module {
  Classifier()
      : embedding(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(20, 5).padding_idx(0)))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(5, 6).batch_first(true)))),
        fc(register_module("fc", nn::Linear(6, 3))) {}
  Tensor forward(const Tensor& tokens, const Tensor& lengths) {  // (B, T), (B)
    return fc(lstm(embedding(tokens), nn::RNNState{}, lengths).h_n[0]);  // (B, 3)
  }
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear fc;
};

std::vector<std::vector<double>> gradients(Classifier& model) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_vector<double>());
  return out;
}

void check_equal_gradients(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b,
                           const std::string& what) {
  REQUIRE(a.size() == b.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) {
      worst = std::max(worst, std::abs(a[i][j] - b[i][j]));
      largest = std::max(largest, std::abs(b[i][j]));
    }
  }
  INFO(what << ": largest difference " << worst << ", largest gradient " << largest);
  CHECK(largest > 1e-3);  // real gradients, not zeros
  CHECK(worst <= 1e-6);
}

// Trains `batches` micro-batches of b texts with SGD, K per step, and returns each optimizer
// step's gradients; beside it, one batch per step of all the group's texts, from the same
// initial weights. Both must agree at every step (and so end with the same weights).
void check_accumulation_equals_big_batch(size_t k, size_t batches, int64_t b, bool with_scaler) {
  manual_seed(1234);
  const Texts data = random_texts(int64_t(batches) * b, 7);
  auto accumulating = std::make_shared<Classifier>();
  accumulating->to(kFloat64);
  auto big_batch = std::make_shared<Classifier>();
  big_batch->to(kFloat64);
  big_batch->load_state_dict(accumulating->state_dict());
  optim::SGD accumulating_sgd(accumulating->parameters(), 0.5), big_batch_sgd(big_batch->parameters(), 0.5);
  amp::GradScaler scaler({.init_scale = 1024.0, .enabled = with_scaler});

  const train::GradientAccumulation accumulation(k, batches);
  REQUIRE(accumulation.steps_per_epoch() == (batches + k - 1) / k);
  size_t steps = 0;
  for (size_t i = 0; i < batches; ++i) {
    if (accumulation.starts_step(i)) accumulating_sgd.zero_grad();
    const Texts micro = data.slice(int64_t(i) * b, b);
    const Tensor loss = F::cross_entropy(accumulating->forward(micro.tokens, micro.lengths), micro.labels);
    scaler.scale(loss * accumulation.loss_factor(i)).backward();
    if (!accumulation.ends_step(i)) continue;
    scaler.unscale_(accumulating_sgd);
    const size_t group = accumulation.group_size(i);
    const Texts whole = data.slice(int64_t(i + 1 - group) * b, int64_t(group) * b);
    big_batch_sgd.zero_grad();
    F::cross_entropy(big_batch->forward(whole.tokens, whole.lengths), whole.labels).backward();
    check_equal_gradients(gradients(*accumulating), gradients(*big_batch),
                          "step " + std::to_string(steps) + " (" + std::to_string(group) + " micro-batches)");
    REQUIRE(scaler.step(accumulating_sgd));
    scaler.update();
    big_batch_sgd.step();
    ++steps;
  }
  CHECK(steps == accumulation.steps_per_epoch());
  const std::vector<Tensor> p = accumulating->parameters(), q = big_batch->parameters();
  for (size_t i = 0; i < p.size(); ++i) CHECK(p[i].sub(q[i]).abs().max().item<double>() <= 1e-6);
}

}  // namespace

TEST_CASE("GradientAccumulation: groups of K, the last one shorter, and its loss factors", "[accumulation]") {
  const train::GradientAccumulation a(3, 8);  // groups {0 1 2} {3 4 5} {6 7}
  std::vector<int> starts, ends;
  for (size_t i = 0; i < 8; ++i) {
    if (a.starts_step(i)) starts.push_back(int(i));
    if (a.ends_step(i)) ends.push_back(int(i));
  }
  CHECK(starts == std::vector<int>{0, 3, 6});
  CHECK(ends == std::vector<int>{2, 5, 7});
  CHECK(a.loss_factor(4) == 1.0 / 3);
  CHECK(a.loss_factor(6) == 0.5);
  CHECK(a.group_size(7) == 2);
  CHECK(a.steps_per_epoch() == 3);
  const train::GradientAccumulation one(1, 4);  // no accumulation: a step per batch
  for (size_t i = 0; i < 4; ++i) CHECK((one.starts_step(i) && one.ends_step(i) && one.loss_factor(i) == 1.0));
  const train::GradientAccumulation more_than_batches(5, 2);  // one short group
  CHECK(more_than_batches.ends_step(1));
  CHECK(more_than_batches.loss_factor(0) == 0.5);

  require_throws_with<ValueError>([] { train::GradientAccumulation(0, 4); }, {"accum_steps", "at least 1", "0"});
  require_throws_with<ValueError>([] { train::GradientAccumulation(2, 0); }, {"batches_per_epoch 0"});
  require_throws_with<IndexError>([&] { (void)a.ends_step(8); }, {"micro-batch 8", "8 batches"});
}

TEST_CASE("K micro-batches of B give the gradients of one batch of K*B (float64, 1e-6)", "[accumulation]") {
  SECTION("K = 4, every group full") { check_accumulation_equals_big_batch(4, 8, 3, /*with_scaler=*/false); }
  SECTION("K = 3, the last group of 2") { check_accumulation_equals_big_batch(3, 5, 4, false); }
  SECTION("K = 4 with the GradScaler") { check_accumulation_equals_big_batch(4, 8, 3, /*with_scaler=*/true); }
  SECTION("K = 3 with the GradScaler, the last group of 2") { check_accumulation_equals_big_batch(3, 5, 4, true); }
}

TEST_CASE("AccumulatedLoss: each optimizer step's loss is the mean of its micro-batches'", "[accumulation]") {
  const train::GradientAccumulation a(3, 5);  // groups {0 1 2} {3 4}
  train::AccumulatedLoss losses;
  const std::vector<double> micro{0.9, 0.6, 0.3, 2.0, 1.0};
  std::vector<double> steps;
  for (size_t i = 0; i < micro.size(); ++i)
    if (std::optional<double> l = losses.add(a, i, micro[i])) steps.push_back(*l);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0] == Approx(0.6).epsilon(1e-15));
  CHECK(steps[1] == Approx(1.5).epsilon(1e-15));
}
