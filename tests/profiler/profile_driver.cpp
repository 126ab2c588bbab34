// The Loom side of the tensorboard_profile_reader test (read_trace.py): trains a small model for
// six steps under profiler::Profile (schedule: wait 1, warmup 1, active 3; memory on; the
// DataLoader with two workers) with tensorboard_trace_handler(DIR, "driver"), then prints, as one
// JSON line, what it recorded: the steps, the calls per op name and the GPU ops and their time, which the
// script compares with what TensorBoard's profile plugin reads from DIR.
//
//   profile_driver DIR
//
// The model runs on a GPU when there is one, on the host-emulated cuda:0 in a build without
// the CUDA backend (so the trace has its GPU rows: core/cuda_emulation.h), on the CPU otherwise.
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/cuda_emulation.h"
#include "loom.h"

using namespace loom;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::optional<cuda::EmulationGuard> emulate;
  if (!built_with_cuda()) emulate.emplace();
  const Device device = cuda::is_available() ? Device(DeviceType::CUDA, 0) : kCPU;

  manual_seed(0);
  nn::Sequential model(nn::Linear(16, 32), nn::Tanh(), nn::Linear(32, 1));
  model->to(device);
  optim::Adam adam(model->parameters(), 1e-2);
  auto dataset = std::make_shared<data::LambdaDataset<Tensor>>(96, [](size_t i) {
    return full({17}, double(i % 7) / 7.0);  // 16 inputs and the target
  });
  auto stack_rows = [](std::vector<Tensor> rows) { return stack(rows, 0); };
  auto loader = data::make_data_loader(dataset, stack_rows, data::DataLoaderOptions(16).num_workers(2));

  nlohmann::ordered_json recorded;
  {
    profiler::Profile prof({.profile_memory = true,
                            .schedule = profiler::Schedule{.wait = 1, .warmup = 1, .active = 3},
                            .on_trace_ready = [&](profiler::Profile& p) {
                              profiler::tensorboard_trace_handler(dir, "driver")(p);
                              std::map<std::string, int64_t> calls;
                              int64_t gpu_ops = 0, gpu_ns = 0;
                              for (const profiler::Event& e : p.events().events) {
                                if (e.kind == profiler::EventKind::Op || e.kind == profiler::EventKind::BackwardNode)
                                  ++calls[profiler::display_name(e)];
                                if (e.has_gpu_time()) ++gpu_ops, gpu_ns += e.gpu_end_ns - e.gpu_begin_ns;
                              }
                              recorded["steps"] = p.key_averages().steps().steps;
                              recorded["calls"] = calls;
                              recorded["gpu_ops"] = gpu_ops;
                              recorded["gpu_us"] = double(gpu_ns) / 1e3;
                              recorded["memory_records"] = p.events().memory.size();
                              recorded["device"] = device.str();
                            }});
    for (Tensor& batch : loader) {  // six batches
      Tensor batch_on_device = batch.to(device);
      Tensor x = batch_on_device.narrow(1, 0, 16), y = batch_on_device.narrow(1, 16, 1);
      adam.zero_grad();
      nn::functional::mse_loss(model->forward(x), y).backward();
      adam.step();
      prof.step();
    }
  }
  std::printf("%s\n", recorded.dump().c_str());
  return recorded.contains("steps") ? 0 : 1;
}
