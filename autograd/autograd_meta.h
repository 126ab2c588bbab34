// The autograd part of a tensor, allocated on first need (Note [tensor anatomy]).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/node.h"

namespace loom {

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this tensor is
  // A leaf's AccumulateGrad, held weakly: the graph owns it, the leaf only finds it.
  std::weak_ptr<Node> grad_accumulator;
  std::vector<Tensor::PostAccumulateGradHook> post_accumulate_hooks;
  // Leaves' register_hook hooks (non-leaves keep theirs on grad_fn), with their handles.
  std::vector<std::pair<int64_t, Tensor::Hook>> leaf_hooks;
  bool retains_grad = false;
};

// The meta of t, created if missing.
AutogradMeta& autograd_meta(const Tensor& t);
// Null if t has none.
AutogradMeta* autograd_meta_if_any(const Tensor& t);
// The leaf's AccumulateGrad, created on first use.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
// The edge by which a gradient reaches t: its grad_fn's slot, or its accumulator.
Edge gradient_edge(const Tensor& t);

}  // namespace loom
