// The autograd side of Tensor: requires_grad, grad, grad_fn, backward, hooks, detach.
#include "autograd/autograd_meta.h"
#include "autograd/engine.h"

namespace loom {

int64_t new_hook_handle();  // node.cpp

AutogradMeta& autograd_meta(const Tensor& t) {
  LOOM_CHECK(t.defined(), ValueError, "autograd: called on an undefined tensor");
  if (!t.impl()->autograd) t.impl()->autograd = std::make_shared<AutogradMeta>();
  return *t.impl()->autograd;
}

AutogradMeta* autograd_meta_if_any(const Tensor& t) {
  return t.defined() ? t.impl()->autograd.get() : nullptr;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = autograd_meta(leaf);
  LOOM_ASSERT(!meta.grad_fn, "grad_accumulator: not a leaf");
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto acc = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* meta = autograd_meta_if_any(t);
  if (meta && meta->grad_fn) return Edge{meta->grad_fn, meta->output_nr};
  return Edge{grad_accumulator(t), 0};
}

bool Tensor::requires_grad() const {
  AutogradMeta* m = autograd_meta_if_any(*this);
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  AutogradMeta* m = autograd_meta_if_any(*this);
  LOOM_CHECK(!(m && m->grad_fn), AutogradError,
             "requires_grad_: only leaf tensors can change requires_grad; this one is the output of ",
             m ? m->grad_fn->name() : "", " (use detach() to get a leaf)");
  LOOM_CHECK(!requires_grad || is_floating_point(), DTypeError,
             "requires_grad_: only floating-point tensors can require gradients, got dtype ",
             dtype_name(dtype()));
  if (requires_grad || m) autograd_meta(*this).requires_grad = requires_grad;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  AutogradMeta* m = autograd_meta_if_any(*this);
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() const { return autograd_meta(*this).grad; }

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  AutogradMeta* m = autograd_meta_if_any(*this);
  return m ? m->grad_fn : none;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  run_backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
  LOOM_CHECK(defined(), ValueError, "detach: called on an undefined tensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = impl_->sizes;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->device = impl_->device;
  impl->version = impl_->version;  // shared: writes through either are seen by both
  impl->is_view = true;
  return Tensor(std::move(impl));
}

Tensor& Tensor::detach_() {
  if (AutogradMeta* m = autograd_meta_if_any(*this)) {
    m->grad_fn.reset();
    m->output_nr = 0;
    m->requires_grad = false;
  }
  return *this;
}

void Tensor::retain_grad() const {
  LOOM_CHECK(requires_grad(), AutogradError,
             "retain_grad: called on a tensor that does not require grad; shape ", shape_str(sizes()));
  AutogradMeta& m = autograd_meta(*this);
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep their grad anyway
  m.retains_grad = true;
  m.grad_fn->retained_grads.emplace_back(m.output_nr, impl_);
}

namespace {

// The engine passes a hook's result on as the tensor's gradient (into .grad for a leaf,
// into the grad_fn otherwise), so, as PyTorch does, a result of another shape, dtype or
// device than the tensor's is an error, thrown before anything is accumulated.
Tensor::Hook checked_hook(Tensor::Hook fn, const Tensor& t, const AutogradMeta& m) {
  std::string what = detail::str("the ", dtype_name(t.dtype()), " tensor of shape ", shape_str(t.sizes()),
                                 " on ", t.device(),
                                 m.grad_fn ? " (grad_fn " + m.grad_fn->name() + ")" : std::string(" (a leaf)"));
  return [fn = std::move(fn), shape = t.sizes(), dtype = t.dtype(), device = t.device(),
          what = std::move(what)](const Tensor& g) {
    Tensor r = fn(g);
    if (!r.defined()) return r;
    LOOM_CHECK(r.sizes() == shape, ShapeError, "register_hook: a hook on ", what,
               " returned a gradient of shape ", shape_str(r.sizes()), "; expected shape ", shape_str(shape));
    LOOM_CHECK(r.dtype() == dtype, DTypeError, "register_hook: a hook on ", what, " returned a ",
               dtype_name(r.dtype()), " gradient; expected ", dtype_name(dtype));
    LOOM_CHECK(r.device() == device, DeviceError, "register_hook: a hook on ", what,
               " returned a gradient on ", r.device(), "; expected ", device);
    return r;
  };
}

}  // namespace

int64_t Tensor::register_hook(Hook fn) const {
  LOOM_CHECK(requires_grad(), AutogradError,
             "register_hook: cannot register a hook on a tensor that does not require grad; shape ",
             shape_str(sizes()));
  AutogradMeta& m = autograd_meta(*this);
  fn = checked_hook(std::move(fn), *this, m);
  if (m.grad_fn) return m.grad_fn->add_pre_hook(m.output_nr, std::move(fn));
  int64_t handle = new_hook_handle();
  m.leaf_hooks.emplace_back(handle, std::move(fn));
  return handle;
}

void Tensor::remove_hook(int64_t handle) const {
  AutogradMeta* m = autograd_meta_if_any(*this);
  if (!m) return;
  if (m->grad_fn) m->grad_fn->remove_pre_hook(handle);
  std::erase_if(m->leaf_hooks, [&](const auto& h) { return h.first == handle; });
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook fn) const {
  LOOM_CHECK(requires_grad() && is_leaf(), AutogradError,
             "register_post_accumulate_grad_hook: only leaf tensors that require grad have a "
             "gradient accumulated; shape ", shape_str(sizes()));
  autograd_meta(*this).post_accumulate_hooks.push_back(std::move(fn));
}

}  // namespace loom
