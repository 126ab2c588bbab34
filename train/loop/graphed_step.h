// A whole training step replayed as a CUDA graph, in one call: what PyTorch users get from
// torch.compile(mode="reduce-overhead") or by hand with torch.cuda.graph and static tensors.
//
//   optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3).capturable(true));
//   train::GraphedStep step([&](const std::vector<Tensor>& in) {  // in: static copies
//     opt.zero_grad();
//     Tensor loss = nn::functional::cross_entropy(model->forward(in[0], in[1]), in[2]);
//     loss.backward();
//     opt.step();
//     return loss;
//   });
//   for (auto& batch : loader) {
//     Tensor loss = step({batch.tokens, batch.lengths, batch.labels});  // on cuda:0
//     total += loss.item<double>();       // read it before the next call
//   }
//
// Note [graphed training step]
// Per distinct input signature (each input's shape, dtype and device — the bucketing
// DataLoader yields few), the first `warmup_steps` calls run the step eagerly (they make
// the optimizer's state, cuBLAS's handles and workspaces, the allocator's blocks); the next
// call copies the inputs into static tensors of that signature, captures one step into a
// CUDA graph (core/cuda_graph.h) and replays it, and every later call copies and replays.
// Each call runs exactly one step. At most `max_graphs` signatures keep a graph (the least
// recently used is dropped beyond that). What the step returns is, for a replay, the
// graph's static output: overwritten by the next replay.
// Where capture is impossible — inputs not on a GPU, a build or machine without one, or a
// step that does what a capture cannot record (a host sync such as item() inside the step,
// multinomial or attention dropout, a non-capturable optimizer reading its step count on the host) — it says why
// once (why_eager(), and on stderr unless quiet) and runs that signature eagerly from then
// on. Host code inside the step runs during capture only: state the step changes on the
// host (a step counter, a learning rate read on the host) would stay frozen in the replays,
// which is why optimizers and the GradScaler must be capturable (their state on the device).
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loom::cuda {
class CUDAGraph;
}

namespace loom::train {

struct GraphedStepOptions {
  int warmup_steps = 2;     // eager steps per input signature before its capture (>= 1)
  size_t max_graphs = 8;    // signatures that keep a graph (>= 1)
  bool enabled = true;      // false: every step eagerly (a --cuda-graph off switch)
  bool quiet = false;       // true: why_eager() only, nothing on stderr

  GraphedStepOptions& with_warmup_steps(int n) { warmup_steps = n; return *this; }
  GraphedStepOptions& with_max_graphs(size_t n) { max_graphs = n; return *this; }
  GraphedStepOptions& with_enabled(bool on) { enabled = on; return *this; }
  GraphedStepOptions& with_quiet(bool q) { quiet = q; return *this; }
};

// The signature a graph is captured for: each input's shape, dtype and device, in order.
std::string input_signature(const std::vector<Tensor>& inputs);

class GraphedStep {
 public:
  using StepFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

  explicit GraphedStep(StepFn step, GraphedStepOptions options = {});  // ValueError for bad options
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  // One training step on `inputs` (Note [graphed training step]).
  Tensor operator()(const std::vector<Tensor>& inputs);

  bool last_replayed() const { return last_replayed_; }  // the last call replayed a graph
  size_t graphs() const;                                 // signatures with a graph now
  size_t captures() const { return captures_; }          // graphs captured so far (drops count)
  const std::string& why_eager() const { return why_eager_; }  // the first reason capture was refused

 private:
  struct Entry;
  Entry& entry_for(const std::string& signature);
  void give_up(Entry& entry, const std::string& why);  // that signature runs eagerly from now on
  void say_eager(const std::string& why);              // why_eager_ and stderr, the first time
  Tensor capture_and_replay(Entry& entry, const std::vector<Tensor>& inputs);

  StepFn step_;
  GraphedStepOptions options_;
  std::list<Entry> entries_;  // most recently used first
  bool last_replayed_ = false;
  size_t captures_ = 0;
  std::string why_eager_;
};

}  // namespace loom::train
