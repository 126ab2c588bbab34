// The backward pass (Note [how gradients flow]).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace loom {

// Runs backward from `roots`, seeding each with the matching gradient (a defined tensor
// of the root's shape; scalars may pass an undefined one to mean 1). Leaves reached get
// their .grad() accumulated. The graph's saved tensors are freed unless retain_graph.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph);

// Returns d(sum(outputs * grad_outputs))/d(inputs) without touching .grad() (as
// torch.autograd.grad). An input not reached gets an undefined tensor.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

// Clears the gradients of `tensors` (set_to_none, PyTorch's default) or zeroes them in
// place; Module::zero_grad and Optimizer::zero_grad both use it.
void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none = true);

}  // namespace loom
