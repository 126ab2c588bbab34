// GraphedStep (train/loop/graphed_step.h, Note [graphed training step]).
#include "train/loop/graphed_step.h"

#include <cstdio>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "core/factories.h"

namespace loom::train {

struct GraphedStep::Entry {
  std::string signature;
  int eager_runs = 0;
  bool eager_only = false;  // its capture was refused
  std::unique_ptr<cuda::CUDAGraph> graph;
  std::vector<Tensor> static_inputs;  // what the graph reads
  Tensor static_output;               // what the graph writes
};

std::string input_signature(const std::vector<Tensor>& inputs) {
  std::string s;
  for (const Tensor& t : inputs) {
    if (!s.empty()) s += "; ";
    s += t.defined() ? detail::str(shape_str(t.sizes()), " ", dtype_name(t.dtype()), " ", t.device()) : "undefined";
  }
  return s;
}

namespace {
// Why these inputs cannot be captured ("" if they can): a graph runs on one GPU.
std::string not_capturable(const std::vector<Tensor>& inputs) {
  if (inputs.empty()) return "the step has no inputs to copy new batches into";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) return detail::str("input ", i, " is undefined");
    if (!inputs[i].is_cuda()) return detail::str("input ", i, " is on ", inputs[i].device(), ", not on a CUDA device");
    if (inputs[i].device() != inputs[0].device())
      return detail::str("inputs on two devices (", inputs[0].device(), " and ", inputs[i].device(), ")");
  }
  return "";
}
}  // namespace

GraphedStep::GraphedStep(StepFn step, GraphedStepOptions options) : step_(std::move(step)), options_(options) {
  LOOM_CHECK(step_ != nullptr, ValueError, "GraphedStep: no step function");
  LOOM_CHECK(options_.warmup_steps >= 1, ValueError, "GraphedStep: warmup_steps must be at least 1, got ",
             options_.warmup_steps, " (the optimizer's state and the libraries' handles are made eagerly)");
  LOOM_CHECK(options_.max_graphs >= 1, ValueError, "GraphedStep: max_graphs must be at least 1");
}

GraphedStep::~GraphedStep() = default;

size_t GraphedStep::graphs() const {
  size_t n = 0;
  for (const Entry& e : entries_) n += e.graph != nullptr;
  return n;
}

GraphedStep::Entry& GraphedStep::entry_for(const std::string& signature) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->signature == signature) {
      entries_.splice(entries_.begin(), entries_, it);  // most recently used first
      return entries_.front();
    }
  entries_.emplace_front();
  entries_.front().signature = signature;
  return entries_.front();
}

void GraphedStep::give_up(Entry& entry, const std::string& why) {
  entry.eager_only = true;
  entry.graph.reset();
  entry.static_inputs.clear();
  entry.static_output = Tensor();
  say_eager(why);
}

void GraphedStep::say_eager(const std::string& why) {
  if (!why_eager_.empty()) return;  // said once
  why_eager_ = why;
  if (!options_.quiet) std::fprintf(stderr, "GraphedStep: running the step eagerly: %s\n", why.c_str());
}

Tensor GraphedStep::operator()(const std::vector<Tensor>& inputs) {
  last_replayed_ = false;
  if (!options_.enabled) return step_(inputs);
  if (const std::string why = not_capturable(inputs); !why.empty()) {
    say_eager(why);
    return step_(inputs);
  }
  Entry& entry = entry_for(input_signature(inputs));
  if (entry.eager_only) return step_(inputs);
  if (entry.eager_runs < options_.warmup_steps) {
    ++entry.eager_runs;
    return step_(inputs);
  }
  if (!entry.graph) return capture_and_replay(entry, inputs);
  for (size_t i = 0; i < inputs.size(); ++i) entry.static_inputs[i].copy_(inputs[i]);
  entry.graph->replay();
  last_replayed_ = true;
  return entry.static_output;
}

Tensor GraphedStep::capture_and_replay(Entry& entry, const std::vector<Tensor>& inputs) {
  entry.static_inputs.clear();
  for (const Tensor& in : inputs) {
    Tensor copy = empty(in.sizes(), TensorOptions(in.dtype()).device(in.device()));
    copy.copy_(in);
    entry.static_inputs.push_back(copy);
  }
  auto graph = std::make_unique<cuda::CUDAGraph>();
  Tensor output;
  try {
    cuda::GraphCapture capture(*graph);
    output = step_(entry.static_inputs);
  } catch (const CaptureError& e) {  // the step does what a capture cannot record
    give_up(entry, e.what());
    return step_(inputs);
  } catch (const DeviceError& e) {  // no GPU to capture on (the host-emulated device)
    give_up(entry, e.what());
    return step_(inputs);
  }
  ++captures_;
  entry.graph = std::move(graph);
  entry.static_output = output;
  // Beyond max_graphs, the least recently used signature's graph goes (it warms up again
  // if it comes back). The entry just captured is the most recent.
  while (graphs() > options_.max_graphs)
    for (auto it = std::prev(entries_.end());; --it)
      if (it->graph) {
        entries_.erase(it);
        break;
      }
  entries_.front().graph->replay();
  last_replayed_ = true;
  return entries_.front().static_output;
}

}  // namespace loom::train
