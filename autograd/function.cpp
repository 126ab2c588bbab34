#include "autograd/function.h"

#include <algorithm>

#include "autograd/autograd_meta.h"

namespace loom {

std::vector<Tensor> LambdaNode::apply(std::vector<Tensor>&& grads) {
  BackwardContext ctx;
  bool any = false;
  for (const Tensor& g : grads) any |= g.defined();
  if (!any) return std::vector<Tensor>(next_edges_.size());
  ctx.grads = std::move(grads);
  ctx.saved.reserve(saved.size());
  for (const SavedVariable& s : saved) ctx.saved.push_back(s.unpack());
  ctx.needs_input_grad.reserve(next_edges_.size());
  for (const Edge& e : next_edges_) ctx.needs_input_grad.push_back(e.valid());
  std::vector<Tensor> out = fn_(ctx);
  out.resize(next_edges_.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (!next_edges_[i].valid()) out[i] = Tensor();
  return out;
}

void LambdaNode::release_variables() {
  for (SavedVariable& s : saved) s.reset();
}

bool needs_grad_list(const std::vector<Tensor>& ts) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

std::shared_ptr<LambdaNode> record(const char* name, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& saved, BackwardFn fn) {
  auto node = std::make_shared<LambdaNode>(name, std::move(fn));
  collect_next_edges(*node, inputs);
  node->saved.reserve(saved.size());
  for (const Tensor& t : saved) node->saved.emplace_back(t, name);
  node->set_num_outputs(uint32_t(std::max<size_t>(outputs.size(), 1)));
  for (size_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& m = autograd_meta(outputs[i]);
    m.grad_fn = node;
    m.output_nr = uint32_t(i);
  }
  return node;
}

void check_inplace(const Tensor& self, const char* op) {
  if (!GradMode::is_enabled()) return;
  AutogradMeta* m = autograd_meta_if_any(self);
  if (!m) return;
  LOOM_CHECK(!(m->requires_grad && !m->grad_fn), AutogradError, op,
             ": a leaf tensor that requires grad (shape ", shape_str(self.sizes()),
             ") cannot be modified in place; wrap the update in NoGradGuard");
}

void rebase_history(const Tensor& self, const std::shared_ptr<Node>& node, const char* op) {
  check_inplace(self, op);
  LOOM_CHECK(!self.impl()->is_view, NotImplementedError, op,
             ": in-place operations on views of tensors that require grad are not supported; "
             "use the out-of-place form");
  AutogradMeta& m = autograd_meta(self);
  m.grad_fn = node;
  m.output_nr = 0;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - int64_t(shape.size());
  LOOM_ASSERT(lead >= 0, "sum_to: cannot reduce ", shape_str(grad.sizes()), " to ", shape_str(shape));
  Dims dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead) dims.push_back(d);
    else if (shape[size_t(d - lead)] == 1 && grad.size(d) != 1) dims.push_back(d);
  }
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  if (lead > 0 || r.sizes() != shape) r = r.reshape(shape);
  return r;
}

}  // namespace loom
