// The backward pass (Note [how gradients flow] in node.h).
#include "autograd/engine.h"

#include <cmath>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/autograd_meta.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/profiler.h"

namespace loom {
namespace {

struct CompareSeq {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Checks a gradient a node returned against the forward input it belongs to.
void validate_grad(const Node& node, size_t i, const Tensor& g) {
  const InputMeta& m = node.input_meta()[i];
  LOOM_CHECK(g.sizes() == m.shape, InternalError, "autograd: ", node.name(),
             " returned a gradient of shape ", shape_str(g.sizes()), " for input ", i,
             ", expected ", shape_str(m.shape));
  LOOM_CHECK(g.dtype() == m.dtype, InternalError, "autograd: ", node.name(), " returned a ",
             dtype_name(g.dtype()), " gradient for input ", i, ", expected ", dtype_name(m.dtype));
  LOOM_CHECK(g.device() == m.device, InternalError, "autograd: ", node.name(),
             " returned a gradient on ", g.device(), " for input ", i, ", expected ", m.device);
}

void check_anomaly(const Node& node, size_t i, const Tensor& g) {
  if (!g.is_floating_point()) return;
  for (double v : g.to_vector<double>()) {
    LOOM_CHECK(std::isfinite(v), AutogradError, "anomaly mode: ", node.name(),
               " returned a gradient containing ", std::isnan(v) ? "NaN" : "Inf", " for input ", i,
               " (shape ", shape_str(g.sizes()), ")");
  }
}

// A node's name as PyTorch's profiler shows it: "MulBackward0" for Loom's "MulBackward" (PyTorch
// numbers the backward nodes of an op's overloads; Loom has one per op, the 0th), and
// "torch::autograd::AccumulateGrad". Interned once per name and thread.
const char* profiler_name(const Node& node) {
  thread_local std::unordered_map<std::string, const char*> names;
  std::string name = node.name();
  auto it = names.find(name);
  if (it != names.end()) return it->second;
  std::string shown = name;
  if (shown == "AccumulateGrad") shown = "torch::autograd::AccumulateGrad";
  else if (shown.size() > 8 && shown.compare(shown.size() - 8, 8, "Backward") == 0) shown += "0";
  return names.emplace(std::move(name), profiler::intern(shown)).first->second;
}

struct Capture {
  Node* fn;
  uint32_t input_nr;
  size_t result_index;
};

// Runs the graph. With captures (autograd::grad), the gradients reaching the captured
// edges are returned instead of being accumulated, and no AccumulateGrad runs.
std::vector<Tensor> execute(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                            bool retain_graph, const std::vector<Edge>* capture_edges) {
  LOOM_CHECK(roots.size() == grad_roots.size(), ValueError, "backward: got ", roots.size(),
             " tensors but ", grad_roots.size(), " gradients");
  NoGradGuard no_grad;
  const autocast::SuspendGuard no_autocast;  // backward formulas run in their forward's dtypes
  std::vector<Edge> root_edges;
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    LOOM_CHECK(r.defined(), ValueError, "backward: tensor ", i, " is undefined");
    LOOM_CHECK(r.requires_grad(), AutogradError, "backward: tensor ", i, " of shape ",
               shape_str(r.sizes()), " does not require grad and has no grad_fn");
    Tensor g = grad_roots[i];
    if (!g.defined()) {
      LOOM_CHECK(r.numel() == 1, AutogradError,
                 "backward: a gradient can be created implicitly only for scalar outputs; got "
                 "shape ", shape_str(r.sizes()), " (pass a gradient of that shape)");
      g = ones_like(r);
    } else {
      LOOM_CHECK(g.sizes() == r.sizes(), ShapeError, "backward: gradient of shape ",
                 shape_str(g.sizes()), " does not match the tensor's shape ", shape_str(r.sizes()));
      LOOM_CHECK(g.device() == r.device(), DeviceError, "backward: gradient on ", g.device(),
                 " for a tensor on ", r.device());
      if (g.dtype() != r.dtype()) g = g.to(r.dtype());
    }
    root_edges.push_back(gradient_edge(r));
    seeds.push_back(g);
  }

  // Count, for every reachable node, how many edges lead into it.
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Edge& e : root_edges) {
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      keep_alive[e.fn.get()] = e.fn;
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        dependencies[e.fn.get()]++;
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }

  std::vector<Capture> captures;
  std::vector<Tensor> captured;
  if (capture_edges) {
    for (size_t i = 0; i < capture_edges->size(); ++i)
      captures.push_back({(*capture_edges)[i].fn.get(), (*capture_edges)[i].input_nr, i});
    captured.resize(capture_edges->size());
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_to_buffer = [&](Node* fn, uint32_t slot, const Tensor& g) {
    auto& buf = buffers[fn];
    if (buf.size() < fn->num_outputs()) buf.resize(fn->num_outputs());
    buf[slot] = buf[slot].defined() ? buf[slot] + g : g;
  };
  for (size_t i = 0; i < root_edges.size(); ++i)
    add_to_buffer(root_edges[i].fn.get(), root_edges[i].input_nr, seeds[i]);

  std::priority_queue<Node*, std::vector<Node*>, CompareSeq> ready;
  for (const Edge& e : root_edges)
    if (dependencies[e.fn.get()] == 0) ready.push(e.fn.get());
  std::unordered_set<Node*> queued;

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    if (!queued.insert(node).second) continue;
    std::vector<Tensor> grads = std::move(buffers[node]);
    buffers.erase(node);
    grads.resize(node->num_outputs());
    node->run_pre_hooks(grads);
    for (auto& [slot, weak] : node->retained_grads) {
      if (auto impl = weak.lock(); impl && grads[slot].defined()) {
        Tensor t(impl);
        Tensor& tg = autograd_meta(t).grad;
        tg = tg.defined() ? tg + grads[slot] : grads[slot].clone();
      }
    }
    bool is_accumulator = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    if (capture_edges) {
      for (const Capture& c : captures) {
        if (c.fn == node && c.input_nr < grads.size() && grads[c.input_nr].defined())
          captured[c.result_index] = grads[c.input_nr];
      }
      if (is_accumulator) continue;
    }
    std::vector<Tensor> outputs;
    {
      const profiler::ScopedEvent event(profiler::is_recording() ? profiler_name(*node) : "",
                                        profiler::EventKind::BackwardNode);
      outputs = node->apply(std::move(grads));
      if (!retain_graph) node->release_variables();
    }
    if (is_accumulator) continue;
    const auto& edges = node->next_edges();
    LOOM_CHECK(outputs.size() == edges.size(), InternalError, "autograd: ", node->name(),
               " returned ", outputs.size(), " gradients for ", edges.size(), " inputs");
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (outputs[i].defined()) {
        validate_grad(*node, i, outputs[i]);
        if (AnomalyMode::is_enabled()) check_anomaly(*node, i, outputs[i]);
        add_to_buffer(e.fn.get(), e.input_nr, outputs[i]);
      }
      keep_alive.try_emplace(e.fn.get(), e.fn);
      if (--dependencies[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
  return captured;
}

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph) {
  execute(roots, grad_roots, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    LOOM_CHECK(inputs[i].defined() && inputs[i].requires_grad(), AutogradError,
               "grad: input ", i, " does not require grad");
    edges.push_back(gradient_edge(inputs[i]));
  }
  std::vector<Tensor> seeds = grad_outputs;
  if (seeds.empty()) seeds.resize(outputs.size());
  return execute(outputs, seeds, retain_graph, &edges);
}

void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none) {
  for (const Tensor& t : tensors) {
    if (!t.grad().defined()) continue;
    if (set_to_none) {
      t.mutable_grad() = Tensor();
    } else {
      NoGradGuard no_grad;
      t.mutable_grad().zero_();
    }
  }
}

}  // namespace loom
