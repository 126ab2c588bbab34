#include "autograd/node.h"

#include <atomic>

#include "autograd/autograd_meta.h"
#include "autograd/grad_mode.h"

namespace loom {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};
std::atomic<int64_t> next_hook_handle{1};
}  // namespace

int64_t new_hook_handle() { return next_hook_handle.fetch_add(1); }

// ---- SavedVariable --------------------------------------------------------------------

SavedVariable::SavedVariable(const Tensor& t, const char* op_name) : op_name_(op_name) {
  if (!t.defined()) return;
  was_defined_ = true;
  if (SavedTensorHooks* hooks = current_saved_tensor_hooks()) {
    packed_ = hooks->pack(t);
    return;
  }
  data_ = t.detach();
  saved_version_ = t.version();
}

Tensor SavedVariable::unpack() const {
  LOOM_CHECK(!released_, AutogradError, op_name_,
             ": trying to backward through the graph a second time (or to use saved tensors after "
             "they were freed). Pass retain_graph=true to the first backward if you need to "
             "backward twice");
  if (!was_defined_) return Tensor();
  if (packed_) return packed_->unpack();
  LOOM_CHECK(data_.version() == saved_version_, AutogradError,
             "one of the tensors needed for gradient computation has been modified by an in-place "
             "operation: the ", dtype_name(data_.dtype()), " tensor of shape ", shape_str(data_.sizes()),
             " saved by ", op_name_, " is at version ", data_.version(), "; expected version ",
             saved_version_);
  return data_;
}

// ---- Node -----------------------------------------------------------------------------

Node::Node() : sequence_nr_(next_sequence_nr.fetch_add(1)) {}

Node::~Node() {
  // Freeing a chain of N nodes through the shared_ptrs would recurse N deep and overflow
  // the stack for long graphs (an RNN over a long sequence, a loss summed over many
  // steps). Instead, the nodes only this one owns are moved to a heap stack and freed
  // one at a time, each with no uniquely owned edges left.
  std::vector<std::shared_ptr<Node>> stack;
  auto take_unique = [&stack](std::vector<Edge>& edges) {
    for (Edge& e : edges)
      if (e.fn && e.fn.use_count() == 1) stack.push_back(std::move(e.fn));
  };
  take_unique(next_edges_);
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    take_unique(node->next_edges_);
  }
}

int64_t Node::add_pre_hook(uint32_t slot, PreHook hook) {
  int64_t handle = new_hook_handle();
  pre_hooks_.push_back({handle, slot, std::move(hook)});
  return handle;
}

void Node::remove_pre_hook(int64_t handle) {
  std::erase_if(pre_hooks_, [&](const HookEntry& h) { return h.handle == handle; });
}

void Node::run_pre_hooks(std::vector<Tensor>& grads) const {
  for (const HookEntry& h : pre_hooks_) {
    if (h.slot >= grads.size() || !grads[h.slot].defined()) continue;
    Tensor replaced = h.fn(grads[h.slot]);
    if (replaced.defined()) grads[h.slot] = replaced;
  }
}

void collect_next_edges(Node& node, const std::vector<Tensor>& inputs) {
  node.next_edges_.clear();
  node.input_meta_.clear();
  node.next_edges_.reserve(inputs.size());
  node.input_meta_.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) {
      node.next_edges_.push_back(gradient_edge(t));
      node.input_meta_.push_back({t.sizes(), t.dtype(), t.device()});
    } else {
      node.next_edges_.push_back(Edge{});
      node.input_meta_.push_back({});
    }
  }
}

// ---- AccumulateGrad -------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  AutogradMeta& meta = autograd_meta(variable_);
  for (auto& [handle, hook] : meta.leaf_hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = replaced;
  }
  NoGradGuard no_grad;
  if (!meta.grad.defined()) {
    // Take the gradient if nobody else holds it; otherwise copy, so that accumulating
    // in place later never writes into a tensor the user (or another edge) still sees.
    meta.grad = g.impl_ptr().use_count() == 1 && g.is_contiguous() ? g : g.clone();
  } else {
    meta.grad.add_(g);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(variable_);
  return {};
}

}  // namespace loom
