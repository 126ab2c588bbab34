// Saved-tensor hooks, as torch.autograd.graph.saved_tensors_hooks: what an op keeps for its
// backward, decided by the code around it.
//
// Note [saved-tensor hooks]
// While a SavedTensorHooksGuard is alive on a thread, every tensor an op saves for backward
// there (each SavedVariable made, autograd/node.h) is handed to hooks->pack, and the
// SavedVariable keeps only the SavedTensorPack that pack returns, not the tensor; backward
// gets the tensor back from pack->unpack(). loom::checkpoint (autograd/activation_checkpoint.h)
// packs an index and recomputes the tensor in backward, so a segment's activations are
// freed after its forward. The innermost guard wins; a guard of nullptr turns the hooks off
// inside it. A packed tensor is not checked for in-place changes (the pack owns what it keeps).
#pragma once

#include <memory>

#include "core/tensor.h"

namespace loom {

class SavedTensorPack {
 public:
  virtual ~SavedTensorPack() = default;
  virtual Tensor unpack() const = 0;
};

class SavedTensorHooks {
 public:
  virtual ~SavedTensorHooks() = default;
  virtual std::shared_ptr<SavedTensorPack> pack(const Tensor& t) = 0;
};

// The hooks in force on this thread, or nullptr.
SavedTensorHooks* current_saved_tensor_hooks();

// Makes hooks (which must outlive the guard) this thread's hooks until the guard ends.
class SavedTensorHooksGuard {
 public:
  explicit SavedTensorHooksGuard(SavedTensorHooks* hooks);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;

 private:
  SavedTensorHooks* previous_;
};

}  // namespace loom
