// Activation checkpointing, as torch.utils.checkpoint.checkpoint(fn, *inputs,
// use_reentrant=False): a segment of the forward whose activations are not kept for
// backward but recomputed there, trading compute for memory.
//
//   Tensor y = loom::checkpoint([&](const Tensor& x) { return block->forward(x); }, x);
//   y.sum().backward();   // runs block->forward(x) again, then its backward
//
// Note [non-reentrant checkpoint]
// fn runs once in forward as usual, building its graph (so gradients reach the inputs and
// every parameter fn uses, through backward() and loom::grad alike, whether or not an input
// requires grad), but under saved-tensor hooks (Note [saved-tensor hooks]) that keep, for
// each tensor an op saves, only its index, shape and dtype: the segment's activations are
// freed when fn returns. The first time backward unpacks one of them, fn runs again on the
// same inputs, with grad mode on, under the generator state and the autocast state of the
// forward (so dropout draws the same masks; the generator is put back after), and the
// tensors it saves, in the same order, are the ones backward gets. A recomputation that
// saves a tensor of another shape or dtype than the forward's at the same place, or fewer,
// is an AutogradError. The recomputation stops at the last tensor it must save (PyTorch's
// early stop): what fn does after that is not run again (an exception of Loom's own is
// thrown from that save through fn, so fn must not swallow exceptions). Checkpoints nest: an inner one
// keeps its inputs through the outer one's hooks. This is PyTorch's non-reentrant design;
// the differences: the generator restored is Loom's one default generator
// (it serves every device), and an input changed in place after the forward is an error
// at the recomputation. fn, and everything it captures, must stay valid until backward.
#pragma once

#include <concepts>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace loom {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Note [nested recomputation]
// A checkpoint inside another one saves only its inputs through the outer one's hooks, so
// the outer segment keeps only its own inputs until backward. There the outer recomputation
// runs fn again up to the last inner input backward needs (early stop), and each inner
// segment is recomputed from those when backward reaches it: one inner segment's
// activations at a time, for one recomputation more of what precedes the last inner one. An
// inner checkpoint with keep_attention serves its kept attention outputs to the outer
// recomputation too (the k-th checkpoint that recomputation runs stands for the forward's
// k-th, its twin), so no attention runs twice. TransformerEncoderOptions with both
// checkpoint_layers and checkpoint_blocks nests them that way.
struct CheckpointOptions {
  // Selective checkpointing, as PyTorch's with a policy that saves the attention op: each
  // fused scaled-dot-product attention in fn keeps its output and log-sum-exp from the
  // forward ((..., L, Ev) and (..., L) floats) and the recomputation takes them instead of
  // running the attention again. Costs those tensors' memory until backward; saves the
  // attention's forward (O(L S)) in the recomputation. The same numbers either way.
  bool keep_attention = false;
};

// outputs = fn(inputs), with fn's activations recomputed in backward. With grad mode off,
// just fn(inputs).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});

namespace detail {
// For the fused attention op (autograd/functions/attention.cpp). In the forward of a
// checkpoint with keep_attention, checkpoint_keep_attention holds the op's outputs for the
// recomputation; in that recomputation, checkpoint_kept_attention returns them, in the same
// order. Elsewhere the one does nothing and the other returns nothing.
void checkpoint_keep_attention(const std::vector<Tensor>& outputs);
std::vector<Tensor> checkpoint_kept_attention();
}  // namespace detail

// The same for fn(const Tensor&...) -> Tensor.
template <typename F, typename... Ts>
  requires(std::same_as<Ts, Tensor> && ...) && std::invocable<F&, const Ts&...>
Tensor checkpoint(F fn, const Ts&... inputs) {
  return checkpoint(
      CheckpointFn([fn](const std::vector<Tensor>& in) {
        return [&]<size_t... I>(std::index_sequence<I...>) {
          return std::vector<Tensor>{fn(in[I]...)};
        }(std::index_sequence_for<Ts...>{});
      }),
      std::vector<Tensor>{inputs...})[0];
}

}  // namespace loom
