// The host-emulated CUDA device (core/cuda_emulation.h) of builds without the CUDA backend:
// its device API, and a whole training step on "cuda:0" that must give the CPU's numbers
// bit for bit (the same kernels run) while every tensor it makes stays on cuda:0. This
// tests Loom's device plumbing above the kernels — where each tensor is made, what moves,
// what is refused — not a GPU kernel; the "[.cuda]" tests need a real GPU for those.
#include "catch2_compat.h"

#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/cuda_emulation.h"
#include "core/safetensors.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/rnn.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "tests/test_util.h"

using namespace loom;

#ifdef LOOM_WITH_CUDA

TEST_CASE("cuda emulation: refused in a build with the CUDA backend", "[cuda_emulation]") {
  REQUIRE_THROWS_AS(cuda::EmulationGuard(), DeviceError);
  REQUIRE_FALSE(cuda::emulated());
}

#else

TEST_CASE("cuda emulation: the device API and memory stats of cuda:0, only within the guard", "[cuda_emulation]") {
  REQUIRE_FALSE(cuda::is_available());
  {
    cuda::EmulationGuard emulate;
    REQUIRE(cuda::is_available());
    REQUIRE(cuda::device_count() == 1);
    REQUIRE_THAT(cuda::device_name(0), Catch::Contains("emulated"));
    REQUIRE_THROWS_WITH(cuda::DeviceGuard(Device(DeviceType::CUDA, 1)), Catch::Contains("out of range"));
    REQUIRE_THROWS_AS(zeros({2}, TensorOptions().device(Device(DeviceType::CUDA, 1))), DeviceError);
    cuda::synchronize();
    const size_t before = cuda::memory_allocated();
    cuda::reset_peak_memory_stats();
    const Tensor x = test::random_nonzero({256});
    {
      const Tensor g = x.to(kCUDA);
      REQUIRE(g.is_cuda());
      REQUIRE(cuda::memory_allocated() == before + 256 * sizeof(float));
      REQUIRE(g.cpu().to_vector<float>() == x.to_vector<float>());
      REQUIRE(x.pin_memory().to_vector<float>() == x.to_vector<float>());  // pin_memory: a copy
    }
    REQUIRE(cuda::memory_allocated() == before);
    REQUIRE(cuda::max_memory_allocated() == before + 256 * sizeof(float));
  }
  REQUIRE_FALSE(cuda::is_available());
  REQUIRE_THROWS_AS(zeros({2}, TensorOptions().device(kCUDA)), DeviceError);
}

namespace {

// Embedding (padding 0) -> 2-layer LSTM with lengths and dropout -> Linear: PyTorch's text
// classifier, on any device.
struct Classifier : nn::Module {
  Classifier()
      : embedding(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(50, 8).padding_idx(0)))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(8, 12).num_layers(2).dropout(0.3).batch_first(true)))),
        fc(register_module("fc", nn::Linear(12, 3))) {}
  Tensor forward(const Tensor& tokens, const Tensor& lengths) {
    return fc(lstm(embedding(tokens), nn::RNNState{}, lengths).h_n.select(0, -1));
  }
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear fc;
};

struct Run {
  std::vector<float> losses;
  nn::StateDict state;
};

// Five Adam steps with clipping and a weighted loss module on `device`; the batches are
// made on the CPU and moved, as a DataLoader's are.
Run train_five_steps(Device device) {
  manual_seed(31);
  auto model = std::make_shared<Classifier>();
  nn::CrossEntropyLoss criterion(nn::CrossEntropyLossOptions().weight(rand({3}) + 0.5).label_smoothing(0.1));
  model->to(device);
  criterion->to(device);
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-2));
  Run run;
  for (int step = 0; step < 5; ++step) {
    Tensor tokens = randint(1, 50, {4, 6});
    const Tensor lengths = from_vector<int64_t>({6, 3, 5, 2}, {4});  // stays on the CPU
    tokens = tokens * (arange(6).unsqueeze(0) < lengths.unsqueeze(1)).to(kInt64);  // padding 0
    const Tensor labels = randint(0, 3, {4});
    adam.zero_grad();
    const Tensor loss = criterion(model->forward(tokens.to(device), lengths), labels.to(device));
    REQUIRE(loss.device() == device);
    loss.backward();
    optim::clip_grad_norm_(model->parameters(), 0.5);
    adam.step();
    run.losses.push_back(loss.item<float>());
  }
  for (const auto& [name, p] : model->named_parameters()) {
    INFO(name);
    REQUIRE(p.device() == device);
    REQUIRE(p.grad().device() == device);
  }
  for (const auto& [key, t] : adam.state_dict()) {  // the moments; counts and hyper-parameters stay on the CPU
    INFO(key);
    if (key.rfind("state.", 0) == 0 && t.is_floating_point()) REQUIRE(t.device() == device);
  }
  run.state = model->state_dict();
  return run;
}

}  // namespace

TEST_CASE("cuda emulation: a training step on cuda:0 gives the CPU's numbers and keeps every tensor there",
          "[cuda_emulation]") {
  const Run cpu = train_five_steps(kCPU);
  cuda::EmulationGuard emulate;
  const Run gpu = train_five_steps(kCUDA);
  REQUIRE(gpu.losses == cpu.losses);
  REQUIRE(gpu.losses.back() < gpu.losses.front());
  REQUIRE(gpu.state.size() == cpu.state.size());
  for (const auto& [name, t] : gpu.state) {
    INFO(name);
    REQUIRE(t.is_cuda());
    REQUIRE(t.cpu().to_vector<float>() == cpu.state.at(name).to_vector<float>());
  }
  // A checkpoint written from the device model loads into a CPU model.
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, TensorMap(gpu.state.begin(), gpu.state.end()));
  Classifier restored;
  const TensorMap loaded = load_safetensors(path).tensors;
  restored.load_state_dict(nn::StateDict(loaded.begin(), loaded.end()));
  for (const auto& [name, t] : restored.state_dict())
    REQUIRE(t.to_vector<float>() == cpu.state.at(name).to_vector<float>());
}

TEST_CASE("cuda emulation: tensors on two devices are refused as on a GPU", "[cuda_emulation]") {
  cuda::EmulationGuard emulate;
  const Tensor c = test::random_nonzero({4, 3}), g = c.to(kCUDA);
  test::require_throws_with<DeviceError>([&] { (void)(c + g); }, {"cpu", "cuda:0"});
  const Tensor cpu_target = from_vector<int64_t>({0, 1, 2, 0}, {4});
  test::require_throws_with<DeviceError>([&] { (void)nn::functional::cross_entropy(g, cpu_target); },
                                         {"cross_entropy", "target", "cpu"});
  test::require_throws_with<DeviceError>([&] { (void)g.matmul(c.t()); }, {"cuda:0", "cpu"});
  // Optimizer state left on the device after the model moved back to the CPU.
  nn::Linear linear(3, 2);
  linear->to(kCUDA);
  optim::Adam adam(linear->parameters(), optim::AdamOptions(1e-2));
  auto step = [&] {
    adam.zero_grad();
    linear(randn({2, 3}, TensorOptions().device(linear->weight.device()))).sum().backward();
    adam.step();
  };
  step();
  linear->to(kCPU);
  test::require_throws_with<DeviceError>(step, {"parameter on cpu", "state", "on cuda:0"});
}

TEST_CASE("cuda emulation: a 0-dim CPU tensor meets device tensors as a scalar, as in PyTorch", "[cuda_emulation]") {
  cuda::EmulationGuard emulate;
  const Tensor x = test::random_nonzero({3, 4});
  const Tensor g = x.to(kCUDA);
  const Tensor two = scalar_tensor(2.0);  // 0-dim, on the CPU
  auto values = [](const Tensor& t) { return t.cpu().to_vector<float>(); };
  const Tensor product = g * two, quotient = two / g;
  REQUIRE(product.is_cuda());
  REQUIRE(quotient.is_cuda());
  REQUIRE(values(product) == values(x * 2.0));
  REQUIRE(values(quotient) == values(2.0 / x));
  const Tensor relu = where(g.gt(0.0), g, scalar_tensor(0.0));
  REQUIRE(relu.is_cuda());
  REQUIRE(values(relu) == values(x.relu()));
  Tensor h = g.clone();
  h.add_(two);
  REQUIRE(values(h) == values(x + 2.0));
  // A scalar that needs a gradient gets it back on the CPU.
  const Tensor s = scalar_tensor(3.0).requires_grad_(true);
  (g * s).sum().backward();
  REQUIRE(s.grad().is_cpu());
  REQUIRE(s.grad().item<float>() == Approx(x.sum().item<float>()).epsilon(1e-6));
  // Only 0-dim tensors: a one-element 1-D CPU tensor is still on the wrong device.
  test::require_throws_with<DeviceError>([&] { (void)(g * ones({1})); }, {"cpu", "cuda:0"});
}

#endif  // LOOM_WITH_CUDA
