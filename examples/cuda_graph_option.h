// --cuda-graph for the examples: each training step (zero_grad, forward, loss, backward,
// clipping, optimizer step, scaler update) replayed as one CUDA graph by train::GraphedStep
// (Note [graphed training step]), as a PyTorch script does with torch.cuda.graph, static
// inputs and a capturable optimizer.
//
//   examples::CudaGraphOption cuda_graph;  cuda_graph.add_to(app);
//   cuda_graph.check(device, accum_steps, distributed.enabled);
//   optim::Adam opt(params, optim::AdamOptions(lr).capturable(cuda_graph.capturable(device)));
//   train::GraphedStep step(step_fn, cuda_graph.options());   // eager without --cuda-graph
//   examples::DeviceStepStats stats;   // what each step returns, read once per epoch
//   for (...) stats.add(step({inputs on the GPU}), batch_size);
//   for (const examples::DeviceStepStats::Step& s : stats.read()) ...   // at the epoch's end
//
// The step's inputs must all live on the GPU (the graph replays addresses; a CPU tensor's
// values would be frozen into it), so the text examples hand the lengths over on the GPU
// too, and the step reads nothing back: its statistics stay on the device until the epoch
// ends. Gradient accumulation and --distributed are not graphed here (a graph is one whole
// optimizer step on one process): asking for them with --cuda-graph is an error that says so.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "loom.h"

namespace examples {

struct CudaGraphOption {
  bool on = false;

  void add_to(CLI::App& app) {
    app.add_flag("--cuda-graph", on,
                 "replay each training step as a CUDA graph (needs --device cuda; docs/cuda.md, CUDA graphs)");
  }
  // ValueError for what --cuda-graph cannot be combined with (the program prints its name first).
  void check(const loom::Device& device, size_t accum_steps, bool distributed) const {
    if (!on) return;
    LOOM_CHECK(device.is_cuda(), loom::ValueError, "--cuda-graph needs --device cuda (got --device ", device,
               "): CUDA graphs replay GPU work");
    LOOM_CHECK(accum_steps == 1, loom::ValueError,
               "--cuda-graph replays whole optimizer steps; it takes --accum-steps 1 (got ", accum_steps, ")");
    LOOM_CHECK(!distributed, loom::ValueError,
               "--cuda-graph with --distributed is not supported by the examples; use one or the other");
  }
  // Whether the optimizer must keep its learning rate and counts on the device.
  bool capturable(const loom::Device& device) const { return on && device.is_cuda(); }
  loom::train::GraphedStepOptions options() const { return loom::train::GraphedStepOptions().with_enabled(on); }
};

// The statistics each step returns (a small float tensor on the step's device, the same
// length every step) with the step's weight on the host (its batch size), kept until the
// epoch's end and then read with one wait. A replayed step's output is the graph's static
// tensor, overwritten by the next replay, so each is cloned (one small copy on the GPU's
// stream, nothing waits).
class DeviceStepStats {
 public:
  struct Step {
    std::vector<double> values;  // what the step returned
    double weight;               // what add() was given with it
  };

  void add(const loom::Tensor& stats, double weight) {
    stats_.push_back(stats.detach().clone());
    weights_.push_back(weight);
  }
  // Each step's statistics and weight, in order (one wait for the GPU); empties the list.
  std::vector<Step> read() {
    std::vector<Step> out;
    if (stats_.empty()) return out;
    const loom::Tensor all = loom::stack(stats_, 0).to(loom::kFloat64).cpu();  // (steps, k)
    const int64_t k = all.size(1);
    const std::vector<double> flat = all.to_vector<double>();
    for (size_t s = 0; s < stats_.size(); ++s)
      out.push_back({{flat.begin() + int64_t(s) * k, flat.begin() + int64_t(s + 1) * k}, weights_[s]});
    stats_.clear();
    weights_.clear();
    return out;
  }

 private:
  std::vector<loom::Tensor> stats_;  // on the device
  std::vector<double> weights_;
};

}  // namespace examples
