// A training step of each example program's model makes no host sync on a GPU (docs/cuda.md,
// "A step without host syncs"; Note [deferred device checks] in kernels/support/device_check.h): the
// step each program runs — zero_grad, forward, loss, backward, clipping, the optimizer's
// step — with its batch moved from pinned memory as the program's DataLoader gives it, is
// bracketed by cuda::host_sync_count(). The steps' losses are compared with the same steps
// on the CPU. On a GPU ("[.cuda]") that covers the kernels; on the host-emulated cuda:0
// (here, in a build without CUDA) it covers everything above them: no .item(), no blocking
// copy, no read-back anywhere in a model, a loss or an optimizer.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_emulation.h"
#include "cuda_test_util.h"
#include "examples/char_rnn_model.h"
#include "examples/embedding_mean_model.h"
#include "examples/text_classification_model.h"
#include "examples/timeseries_model.h"
#include "examples/transformer_classification_model.h"
#include "test_util.h"

using namespace loom;

namespace {

// One example's model, optimizer and batch on a device, and the step its program runs.
struct ExampleStep {
  std::string name;
  std::function<Tensor()> step;  // one training step; its loss, left on the device
  double rtol = 2e-3;            // how close a GPU's losses are to the CPU's
};

// t on device as a DataLoader with pin_memory(true) gives it: pinned, then moved with
// non_blocking (a CPU run neither pins nor moves).
Tensor loaded(const Tensor& t, Device device) {
  return device.is_cuda() ? t.pin_memory().to(device, /*non_blocking=*/true) : t;
}

// Random texts of 3 to 12 tokens in 1..vocab-1 (0 pads), collated and moved as the text
// examples' DataLoader gives them.
data::TextBatch text_batch(Device device, int64_t vocab, int64_t classes, size_t count) {
  std::vector<data::TextExample> examples(count);
  for (size_t i = 0; i < count; ++i) {
    const int64_t length = randint(3, 13, {1}).item<int64_t>();
    examples[i].tokens = randint(1, vocab, {length}).to_vector<int64_t>();
    examples[i].label = randint(0, classes, {1}).item<int64_t>();
  }
  const data::TextBatch batch = data::collate_text(std::move(examples));
  return device.is_cuda() ? batch.pin_memory().to(device, /*non_blocking=*/true) : batch;
}

// The optimizer's step as the examples end a step (examples::scaled_step): the scaler is
// disabled without --amp fp16 and steps the optimizer itself.
void clipped_step(amp::GradScaler& scaler, optim::Optimizer& optimizer, const std::vector<Tensor>& parameters,
                  double max_norm) {
  if (max_norm > 0) {
    scaler.unscale_(optimizer);
    optim::clip_grad_norm_(parameters, max_norm);
  }
  scaler.step(optimizer);
  scaler.update();
}

// A text classifier's step, as examples/text_classifier_program.h and text_classification
// run it: cross_entropy of model(tokens, lengths) against the labels.
template <typename Model>
ExampleStep text_step(std::string name, std::shared_ptr<Model> model, std::shared_ptr<optim::Optimizer> optimizer,
                      Device device, int64_t vocab, double max_norm) {
  model->to(device);
  const data::TextBatch batch = text_batch(device, vocab, 2, 16);
  auto scaler = std::make_shared<amp::GradScaler>(amp::GradScalerOptions{.enabled = false});
  return {std::move(name), [=] {
            optimizer->zero_grad();
            const Tensor logits = model->forward(batch.tokens, batch.lengths);  // (B, classes)
            const Tensor loss = nn::functional::cross_entropy(logits, batch.labels);
            loss.backward();
            clipped_step(*scaler, *optimizer, model->parameters(), max_norm);
            return loss.detach();
          }};
}

std::vector<std::function<ExampleStep(Device)>> example_steps() {
  return {
      [](Device device) {  // text_classification: Adam, clipped at 1
        auto model = std::make_shared<examples::SentimentLSTM>(300, 24, 32, 2, 0.3);
        return text_step("text_classification", model, std::make_shared<optim::Adam>(model->parameters(), 3e-3),
                         device, 300, 1.0);
      },
      [](Device device) {  // transformer_classification: AdamW, clipped at 1
        // No dropout: on a GPU attention may draw its dropout from cuDNN's generator, whose
        // masks are not the CPU's; the losses are compared with the CPU's.
        auto model = std::make_shared<examples::TransformerClassifier>(300, 32, 4, 2, 64, 2, 0.0);
        return text_step("transformer_classification", model,
                         std::make_shared<optim::AdamW>(model->parameters(), 2e-3), device, 300, 1.0);
      },
      [](Device device) {  // embedding_mean: AdamW, no clipping
        auto model = std::make_shared<examples::EmbeddingMeanClassifier>(300, 32, 2);
        return text_step("embedding_mean", model, std::make_shared<optim::AdamW>(model->parameters(), 5e-3), device,
                         300, 0.0);
      },
      [](Device device) {  // char_rnn: next-character cross_entropy over (B·T, V), Adam, clipped at 1
        auto model = std::make_shared<examples::CharLSTM>(60, 16, 32, 2);
        model->to(device);
        auto adam = std::make_shared<optim::Adam>(model->parameters(), 3e-3);
        auto scaler = std::make_shared<amp::GradScaler>(amp::GradScalerOptions{.enabled = false});
        const Tensor text = randint(0, 60, {8, 21});
        const Tensor input = loaded(text.narrow(1, 0, 20).contiguous(), device);  // (B, T)
        const Tensor target = loaded(text.narrow(1, 1, 20).contiguous(), device);
        return ExampleStep{"char_rnn", [=] {
                             adam->zero_grad();
                             const Tensor logits = model->forward(input).first;  // (B, T, V)
                             const Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}),
                                                                               target.reshape({-1}));
                             loss.backward();
                             clipped_step(*scaler, *adam, model->parameters(), 1.0);
                             return loss.detach();
                           }};
      },
      [](Device device) {  // transformer_classification --amp fp16, with a capturable AdamW (docs/optim.md)
        auto model = std::make_shared<examples::TransformerClassifier>(300, 32, 4, 2, 64, 2, 0.0);
        model->to(device);
        auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamOptions(2e-3).capturable(true));
        auto scaler = std::make_shared<amp::GradScaler>();
        const data::TextBatch batch = text_batch(device, 300, 2, 16);
        return ExampleStep{"transformer_classification --amp fp16, capturable AdamW",
                           [=] {
                             adamw->zero_grad();
                             Tensor loss;
                             {
                               amp::AutocastGuard autocast(device, kFloat16);
                               const Tensor logits = model->forward(batch.tokens, batch.lengths);
                               loss = nn::functional::cross_entropy(logits, batch.labels);
                             }
                             scaler->scale(loss).backward();
                             clipped_step(*scaler, *adamw, model->parameters(), 1.0);
                             return loss.detach();
                           },
                           /*rtol=*/2e-2};
      },
      [](Device device) {  // timeseries: mse_loss of the next 8 weeks, Adam, clipped at 1
        auto model = std::make_shared<examples::Forecaster>("lstm", 24, 1, 8);
        model->to(device);
        auto adam = std::make_shared<optim::Adam>(model->parameters(), 3e-3);
        auto scaler = std::make_shared<amp::GradScaler>(amp::GradScalerOptions{.enabled = false});
        const Tensor input = loaded(randn({16, 52, 1}), device);
        const Tensor target = loaded(randn({16, 8}), device);
        return ExampleStep{"timeseries", [=] {
                             adam->zero_grad();
                             const Tensor loss = nn::functional::mse_loss(model->forward(input), target);
                             loss.backward();
                             clipped_step(*scaler, *adam, model->parameters(), 1.0);
                             return loss.detach();
                           }};
      },
  };
}

struct Trace {
  std::vector<double> losses;  // per step, read after the last one
  uint64_t syncs = 0;          // host syncs in the steps after the warm-up
  double rtol = 0;
};

// Two warm-up steps (first-use allocations, cuDNN plans, each device's check record), then
// three counted ones; the losses are read only after the count.
Trace run(const std::function<ExampleStep(Device)>& make, Device device, std::string& name) {
  manual_seed(2026);
  ExampleStep example = make(device);
  name = example.name;
  std::vector<Tensor> losses{example.step(), example.step()};
  const uint64_t before = cuda::host_sync_count();
  for (int i = 0; i < 3; ++i) losses.push_back(example.step());
  Trace trace;
  trace.syncs = cuda::host_sync_count() - before;
  trace.rtol = example.rtol;
  for (const Tensor& l : losses) trace.losses.push_back(l.item<double>());
  return trace;
}

}  // namespace

#ifndef LOOM_WITH_CUDA

TEST_CASE("step syncs: each example's training step waits for nothing on the emulated cuda:0", "[cuda_emulation]") {
  for (const auto& make : example_steps()) {
    std::string name;
    const Trace cpu = run(make, kCPU, name);
    cuda::EmulationGuard emulate;
    const Trace gpu = run(make, kCUDA, name);
    INFO(name);
    CHECK(gpu.syncs == 0);
    CHECK(gpu.losses == cpu.losses);  // the same kernels: the same numbers
    CHECK(gpu.losses.back() < gpu.losses.front());
  }
}

TEST_CASE("step syncs: the emulated cuda:0 counts the waits a GPU would make", "[cuda_emulation]") {
  cuda::EmulationGuard emulate;
  const Tensor x = test::random_nonzero({4});
  uint64_t before = cuda::host_sync_count();
  const Tensor g = x.to(kCUDA);  // a blocking copy
  CHECK(cuda::host_sync_count() == before + 1);
  before = cuda::host_sync_count();
  const Tensor h = x.pin_memory().to(kCUDA, /*non_blocking=*/true);  // queued
  const Tensor doubled = g * 2;                                      // a kernel
  CHECK(cuda::host_sync_count() == before);
  (void)h.sum().item<float>();  // a copy to the host
  CHECK(cuda::host_sync_count() == before + 1);
  cuda::synchronize();
  cuda::Stream::current().synchronize();
  cuda::Event().synchronize();
  CHECK(cuda::host_sync_count() == before + 4);
  (void)doubled;
}

#endif

TEST_CASE("step syncs: each example's training step makes no host sync on the GPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (const auto& make : example_steps()) {
    std::string name;
    const Trace cpu = run(make, kCPU, name);
    const Trace gpu = run(make, kCUDA, name);
    INFO(name);
    CHECK(gpu.syncs == 0);
    REQUIRE(gpu.losses.size() == cpu.losses.size());
    for (size_t i = 0; i < cpu.losses.size(); ++i) {
      INFO("step " << i << ": cuda " << gpu.losses[i] << ", cpu " << cpu.losses[i]);
      CHECK(std::abs(gpu.losses[i] - cpu.losses[i]) <= gpu.rtol * std::abs(cpu.losses[i]) + 1e-5);
    }
  }
}
