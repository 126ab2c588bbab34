// Recording an op's history: the helper every differentiable op uses.
//
//   Tensor out = ...forward via kernels...;
//   if (needs_grad(a, b))
//     record("MulBackward", {a, b}, {out}, {a, b}, [](BackwardContext& ctx) {
//       const Tensor& g = ctx.grad();
//       return std::vector<Tensor>{g * ctx.saved[1], g * ctx.saved[0]};
//     });
//
// The backward lambda runs with grad mode off, gets the gradients w.r.t. the outputs and
// the saved tensors (checked against in-place changes), and returns one gradient per
// input, in input order, already reduced to that input's shape (see sum_to). It may return
// an undefined tensor for an input that does not need one (ctx.needs(i) says which).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace loom {

struct BackwardContext {
  std::vector<Tensor> grads;  // per forward output; undefined where none flowed
  std::vector<Tensor> saved;  // the saved tensors, in the order given to record
  std::vector<bool> needs_input_grad;
  const Tensor& grad() const { return grads[0]; }
  bool needs(size_t input) const { return needs_input_grad[input]; }
};

using BackwardFn = std::function<std::vector<Tensor>(BackwardContext&)>;

// A Node whose backward is a lambda (almost every op's).
class LambdaNode : public Node {
 public:
  // name must outlive the node (a string literal): saved variables point to it.
  LambdaNode(const char* name, BackwardFn fn) : name_(name), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return name_; }
  const char* c_name() const { return name_; }
  void release_variables() override;
  std::vector<SavedVariable> saved;

 private:
  const char* name_;
  BackwardFn fn_;
};

inline bool requires_grad_any() { return false; }
template <typename... Rest>
bool requires_grad_any(const Tensor& first, const Rest&... rest) {
  return (first.defined() && first.requires_grad()) || requires_grad_any(rest...);
}
// True when grad mode is on and any of the tensors requires grad.
template <typename... Ts>
bool needs_grad(const Ts&... ts) {
  return GradMode::is_enabled() && requires_grad_any(ts...);
}
bool needs_grad_list(const std::vector<Tensor>& ts);

// Creates the node and makes it the grad_fn of every output (output i is slot i).
std::shared_ptr<LambdaNode> record(const char* name, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& saved, BackwardFn fn);

// For in-place ops on a tensor with history: makes `self` the output of `node` (slot 0),
// replacing its previous grad_fn. Throws for leaves that require grad and for views.
void rebase_history(const Tensor& self, const std::shared_ptr<Node>& node, const char* op);
// Throws AutogradError if an in-place op on `self` is not allowed (leaf requiring grad
// with grad mode on, or a view of a tensor with history).
void check_inplace(const Tensor& self, const char* op);

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace loom
