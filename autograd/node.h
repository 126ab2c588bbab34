// Node: one recorded op in the autograd graph.
//
// Note [how gradients flow]
// An op whose inputs require grad creates a Node holding (1) the tensors its backward
// needs, as SavedVariables, (2) one Edge per forward input pointing at the node that
// produced that input (or at the input's AccumulateGrad node if it is a leaf, or empty if
// it needs no gradient), and (3) a sequence number from a global counter. The outputs get
// the node as grad_fn. backward() runs nodes in reverse recording order (highest
// sequence number first) once all their consumers are done, sums the gradients arriving
// for the same output, and AccumulateGrad adds (+=) into the leaf's .grad().
// Activation gradients are fresh tensors; only .grad() of leaves accumulates.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/saved_tensor_hooks.h"
#include "core/tensor.h"

namespace loom {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which of fn's outputs (gradient slots) this edge feeds
  bool valid() const { return fn != nullptr; }
};

// What the engine checks a returned gradient against: the forward input's metadata.
struct InputMeta {
  Shape shape;
  DType dtype = DType::Float32;
  Device device = kCPU;
};

// A tensor saved for backward: keeps the data and the version it had when saved, so that
// an in-place change before backward is detected (Note [tensor anatomy]); or, made while
// saved-tensor hooks are in force, only what they packed (Note [saved-tensor hooks]).
class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, const char* op_name);
  // Returns the saved tensor (without history); throws AutogradError if it was modified
  // in place since it was saved, or if the graph was already freed.
  Tensor unpack() const;
  void reset() {
    data_ = Tensor();
    packed_.reset();
    released_ = true;
  }
  bool defined() const { return data_.defined() || packed_ != nullptr; }

 private:
  Tensor data_;
  std::shared_ptr<SavedTensorPack> packed_;  // set instead of data_ under saved-tensor hooks
  uint64_t saved_version_ = 0;
  const char* op_name_ = "";
  bool released_ = false;
  bool was_defined_ = false;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();  // iterative: a deep graph must not overflow the stack when freed
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads[i] is the gradient w.r.t. forward output i (undefined if none flowed there).
  // Returns one gradient per next edge (undefined for inputs that need none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after backward (retain_graph = false).
  virtual void release_variables() {}

  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  const std::vector<InputMeta>& input_meta() const { return input_meta_; }
  uint32_t num_outputs() const { return num_outputs_; }
  void set_num_outputs(uint32_t n) { num_outputs_ = n; }

  // Hooks on the gradient arriving for output `slot` (Tensor::register_hook).
  using PreHook = std::function<Tensor(const Tensor&)>;
  int64_t add_pre_hook(uint32_t slot, PreHook hook);
  void remove_pre_hook(int64_t handle);
  // Applies the pre-hooks to grads in place (called by the engine).
  void run_pre_hooks(std::vector<Tensor>& grads) const;
  // Set by retain_grad(): the engine stores the incoming gradient of these slots.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained_grads;

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMeta> input_meta_;  // one per next edge
  friend void collect_next_edges(Node& node, const std::vector<Tensor>& inputs);

 private:
  uint64_t sequence_nr_;
  uint32_t num_outputs_ = 1;
  struct HookEntry {
    int64_t handle;
    uint32_t slot;
    PreHook fn;
  };
  std::vector<HookEntry> pre_hooks_;
};

// Sets node's next edges and input metadata from the forward inputs.
void collect_next_edges(Node& node, const std::vector<Tensor>& inputs);

// The sink for a leaf: adds the incoming gradient into leaf.grad() (+=, or sets it the
// first time), then runs the leaf's post-accumulate-grad hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

}  // namespace loom
