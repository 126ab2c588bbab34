// Broadcasting binary ops (add, sub, mul, div, pow, maximum, minimum, comparisons),
// where/masked_fill, their scalar and in-place forms, and the operators.
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {

using kernels::BinaryOp;
using kernels::SaveIf;

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) first = t;
    LOOM_CHECK(t->device() == first->device(), DeviceError, op,
               ": expected all tensors on one device, got ", first->device(), " and ", t->device(),
               " (shapes ", shape_str(first->sizes()), " and ", shape_str(t->sizes()), ")");
  }
}

namespace {

bool is_cpu_scalar(const Tensor& t) { return t.defined() && t.dim() == 0 && t.is_cpu(); }

// PyTorch's one exception to "one device": a 0-dim CPU tensor is a scalar and may meet
// tensors on a GPU (`loss / n_tokens` with a count summed on the host). It goes to their
// device: as a fill of its value when it needs no gradient (no host-to-device copy to
// wait for), else by .to(), so that its gradient flows back to the CPU.
Tensor scalar_to(const Tensor& t, Device device) {
  if (!is_cpu_scalar(t) || !device.is_cuda()) return t;
  if (needs_grad(t)) return t.to(device);
  return full({}, t.item(), TensorOptions(t.dtype()).device(device));
}

// The device the operands meet on: that of the first one that is not a CPU scalar.
Device meeting_device(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->defined() && !is_cpu_scalar(*t)) return t->device();
  return kCPU;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LOOM_CHECK(da == db || da == 1 || db == 1, ShapeError, op, ": shapes ", shape_str(a), " and ",
               shape_str(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// The dtype an op computes in: promoted, and floating for true division.
DType compute_dtype(BinaryOp op, DType a, DType b) {
  DType t = promote_types(a, b);
  if (op == BinaryOp::Div && !is_floating_point(t)) t = kFloat32;
  if (t == kBool && kernels::op_info(op).dtypes == kernels::OpDTypes::Numeric)
    throw DTypeError(detail::str(kernels::op_info(op).name, ": not supported for bool tensors"));
  return t;
}

// Gradients of the differentiable binary ops, already reduced to the inputs' shapes.
// Only the saved tensors the formula needs are defined (see binary_op).
std::vector<Tensor> binary_backward(BinaryOp op, BackwardContext& ctx, double alpha,
                                    const Shape& a_shape, const Shape& b_shape) {
  const Tensor& g = ctx.grad();
  const Tensor& a = ctx.saved[0];
  const Tensor& b = ctx.saved[1];
  const Tensor& out = ctx.saved[2];
  Tensor ga, gb;
  switch (op) {
    case BinaryOp::Add:
      if (ctx.needs(0)) ga = g;
      if (ctx.needs(1)) gb = alpha == 1 ? g : g * alpha;
      break;
    case BinaryOp::Sub:
      if (ctx.needs(0)) ga = g;
      if (ctx.needs(1)) gb = g * (-alpha);
      break;
    case BinaryOp::Mul:
      if (ctx.needs(0)) ga = g * b;
      if (ctx.needs(1)) gb = g * a;
      break;
    case BinaryOp::Div:
      if (ctx.needs(0)) ga = g / b;
      if (ctx.needs(1)) gb = -(g * out) / b;
      break;
    case BinaryOp::Pow:
      // d/da a^b = b a^(b-1); d/db a^b = a^b log a (0 where a == 0, as PyTorch).
      if (ctx.needs(0)) ga = where(b.eq(0), zeros_like(g), g * b * a.pow(b - 1));
      if (ctx.needs(1)) gb = where(a.eq(0), zeros_like(g), g * out * a.log());
      break;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      // Ties split the gradient evenly, as PyTorch does.
      Tensor wins = op == BinaryOp::Maximum ? (a > b) : (a < b);
      Tensor share = wins.to(g.dtype()) + a.eq(b).to(g.dtype()) * 0.5;
      if (ctx.needs(0)) ga = g * share;
      if (ctx.needs(1)) gb = g * (1.0 - share);
      break;
    }
    default: break;
  }
  if (ga.defined()) ga = sum_to(ga, a_shape);
  if (gb.defined()) gb = sum_to(gb, b_shape);
  return {ga, gb};
}

Tensor binary_op(BinaryOp op, const Tensor& a_arg, const Tensor& b_arg, double alpha = 1) {
  const trace::OpScope trace;  // Note [op tracing]
  const kernels::BinaryOpInfo& info = kernels::op_info(op);  // Note [op tables]
  const char* name = info.name;
  const Device device = meeting_device({&a_arg, &b_arg});
  const Tensor a_in = autocast::cast_input(scalar_to(a_arg, device), info.autocast);  // Note [autocast]
  const Tensor b_in = autocast::cast_input(scalar_to(b_arg, device), info.autocast);
  check_same_device(name, {&a_in, &b_in});
  const Shape shape = broadcast_shapes(a_in.sizes(), b_in.sizes(), name);
  const DType ct = compute_dtype(op, a_in.dtype(), b_in.dtype());
  const Tensor a = a_in.to(ct), b = b_in.to(ct);
  Tensor out = empty(shape, TensorOptions(kernels::outputs_bool(op) ? kBool : ct).device(a.device()));
  kernels::binary(op, out, broadcast_to_shape(a, shape, name), broadcast_to_shape(b, shape, name), alpha);
  if (info.backward_name && needs_grad(a, b)) {
    // Save only what the gradients to be computed read (SaveIf, kernels/math/elementwise_ops.h).
    const bool ra = a.requires_grad(), rb = b.requires_grad();
    auto saves = [&](SaveIf when) {
      return when == SaveIf::Always || (when == SaveIf::ANeedsGrad && ra) || (when == SaveIf::BNeedsGrad && rb);
    };
    record(info.backward_name, {a, b}, {out},
           {saves(info.saves.a) ? a : Tensor(), saves(info.saves.b) ? b : Tensor(),
            saves(info.saves.out) ? out.detach() : Tensor()},
           [op, alpha, a_shape = a.sizes(), b_shape = b.sizes()](BackwardContext& ctx) {
             return binary_backward(op, ctx, alpha, a_shape, b_shape);
           });
  }
  if (trace) trace.record({name, {a_arg, b_arg}, {out}, {int64_t(op), int64_t(ct)}, {alpha}});  // ints: BinaryOp, compute dtype
  return out;
}

// The dtype a tensor-scalar op computes in: the tensor's, unless a float scalar meets an
// integer tensor (then float32), as PyTorch's wrapped-number promotion.
Tensor scalar_like(const Tensor& t, Scalar s, BinaryOp op) {
  DType dt = t.dtype();
  if (!s.is_integral() && !t.is_floating_point()) dt = kFloat32;
  if (s.is_integral() && !s.is_bool() && dt == kBool && !kernels::is_comparison(op)) dt = kInt64;
  return scalar_tensor(s, TensorOptions(dt).device(t.device()));
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, Scalar s) { return binary_op(op, a, scalar_like(a, s, op)); }

// PyTorch's can_cast for in-place results: narrowing within a kind is allowed (a float32
// result into float16, int64 into int32), floating into integral or anything into bool not.
bool can_cast(DType from, DType to) {
  if (is_floating_point(from) && !is_floating_point(to)) return false;
  return from == kBool || to != kBool;
}

// In-place a = op(a, b): the fast path writes straight into a; with autograd the result
// is computed out of place from a clone of a and copied back, and a takes its history.
Tensor& binary_inplace(BinaryOp op, Tensor& self, const Tensor& other_arg, double alpha) {
  const char* name = kernels::op_info(op).name;
  check_inplace(self, name);
  const Tensor other = scalar_to(other_arg, self.device());
  check_same_device(name, {&self, &other});
  const DType ct = compute_dtype(op, self.dtype(), other.dtype());
  LOOM_CHECK(can_cast(ct, self.dtype()), DTypeError, name, "_: result dtype ", dtype_name(ct),
             " cannot be stored in the ", dtype_name(self.dtype()), " tensor being updated in place");
  const Shape shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  LOOM_CHECK(shape == self.sizes(), ShapeError, name, "_: the result of shape ", shape_str(shape),
             " (of shapes ", shape_str(self.sizes()), " and ", shape_str(other.sizes()),
             ") does not fit the in-place tensor of shape ", shape_str(self.sizes()));
  if (needs_grad(self, other)) {
    Tensor result = binary_op(op, self.clone(), other, alpha).to(self.dtype());
    rebase_history(self, result.grad_fn(), name);  // may throw: before self is written
    {
      NoGradGuard no_grad;
      kernels::copy(self, result);
    }
    self.bump_version();
    return self;
  }
  if (ct != self.dtype()) {  // computed in the wider dtype, stored narrowed
    kernels::copy(self, binary_op(op, self, other, alpha));
    self.bump_version();
    return self;
  }
  kernels::binary(op, self, self, broadcast_to_shape(other.to(ct), self.sizes(), name), alpha);
  self.bump_version();
  return self;
}

}  // namespace

Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return binary_op(BinaryOp::Add, *this, o, alpha.to_double()); }
Tensor Tensor::add(Scalar o) const { return binary_scalar(BinaryOp::Add, *this, o); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return binary_op(BinaryOp::Sub, *this, o, alpha.to_double()); }
Tensor Tensor::sub(Scalar o) const { return binary_scalar(BinaryOp::Sub, *this, o); }
Tensor Tensor::mul(const Tensor& o) const { return binary_op(BinaryOp::Mul, *this, o); }
Tensor Tensor::mul(Scalar o) const { return binary_scalar(BinaryOp::Mul, *this, o); }
Tensor Tensor::div(const Tensor& o) const { return binary_op(BinaryOp::Div, *this, o); }
Tensor Tensor::div(Scalar o) const { return binary_scalar(BinaryOp::Div, *this, o); }
Tensor Tensor::pow(const Tensor& e) const { return binary_op(BinaryOp::Pow, *this, e); }
Tensor Tensor::maximum(const Tensor& o) const { return binary_op(BinaryOp::Maximum, *this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return binary_op(BinaryOp::Minimum, *this, o); }
Tensor Tensor::eq(const Tensor& o) const { return binary_op(BinaryOp::Eq, *this, o); }
Tensor Tensor::eq(Scalar o) const { return binary_scalar(BinaryOp::Eq, *this, o); }
Tensor Tensor::ne(const Tensor& o) const { return binary_op(BinaryOp::Ne, *this, o); }
Tensor Tensor::ne(Scalar o) const { return binary_scalar(BinaryOp::Ne, *this, o); }
Tensor Tensor::lt(const Tensor& o) const { return binary_op(BinaryOp::Lt, *this, o); }
Tensor Tensor::lt(Scalar o) const { return binary_scalar(BinaryOp::Lt, *this, o); }
Tensor Tensor::le(const Tensor& o) const { return binary_op(BinaryOp::Le, *this, o); }
Tensor Tensor::le(Scalar o) const { return binary_scalar(BinaryOp::Le, *this, o); }
Tensor Tensor::gt(const Tensor& o) const { return binary_op(BinaryOp::Gt, *this, o); }
Tensor Tensor::gt(Scalar o) const { return binary_scalar(BinaryOp::Gt, *this, o); }
Tensor Tensor::ge(const Tensor& o) const { return binary_op(BinaryOp::Ge, *this, o); }
Tensor Tensor::ge(Scalar o) const { return binary_scalar(BinaryOp::Ge, *this, o); }

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) { return binary_inplace(BinaryOp::Add, *this, o, alpha.to_double()); }
Tensor& Tensor::add_(Scalar o) { return binary_inplace(BinaryOp::Add, *this, scalar_like(*this, o, BinaryOp::Add), 1); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) { return binary_inplace(BinaryOp::Sub, *this, o, alpha.to_double()); }
Tensor& Tensor::sub_(Scalar o) { return binary_inplace(BinaryOp::Sub, *this, scalar_like(*this, o, BinaryOp::Sub), 1); }
Tensor& Tensor::mul_(const Tensor& o) { return binary_inplace(BinaryOp::Mul, *this, o, 1); }
Tensor& Tensor::mul_(Scalar o) { return binary_inplace(BinaryOp::Mul, *this, scalar_like(*this, o, BinaryOp::Mul), 1); }
Tensor& Tensor::div_(const Tensor& o) { return binary_inplace(BinaryOp::Div, *this, o, 1); }
Tensor& Tensor::div_(Scalar o) { return binary_inplace(BinaryOp::Div, *this, scalar_like(*this, o, BinaryOp::Div), 1); }

Tensor maximum(const Tensor& a, const Tensor& b) { return a.maximum(b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return a.minimum(b); }

Tensor where(const Tensor& cond_arg, const Tensor& a_arg, const Tensor& b_arg) {
  const trace::OpScope trace;  // Note [op tracing]
  const Device device = meeting_device({&cond_arg, &a_arg, &b_arg});
  const Tensor cond = scalar_to(cond_arg, device), a_in = scalar_to(a_arg, device), b_in = scalar_to(b_arg, device);
  check_same_device("where", {&cond, &a_in, &b_in});
  LOOM_CHECK(cond.dtype() == kBool, DTypeError, "where: condition must be bool, got ", dtype_name(cond.dtype()));
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a_in.sizes(), "where"), b_in.sizes(), "where");
  const DType ct = promote_types(a_in.dtype(), b_in.dtype());
  const Tensor a = a_in.to(ct), b = b_in.to(ct);
  Tensor out = empty(shape, TensorOptions(ct).device(a.device()));
  kernels::where(out, broadcast_to_shape(cond, shape, "where"), broadcast_to_shape(a, shape, "where"),
                 broadcast_to_shape(b, shape, "where"));
  if (needs_grad(a, b)) {
    record("WhereBackward", {a, b}, {out}, {cond},
           [a_shape = a.sizes(), b_shape = b.sizes()](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      const Tensor& c = ctx.saved[0];
      Tensor zero = zeros({}, g.options());
      Tensor ga, gb;
      if (ctx.needs(0)) ga = sum_to(where(c, g, zero), a_shape);
      if (ctx.needs(1)) gb = sum_to(where(c, zero, g), b_shape);
      return std::vector<Tensor>{ga, gb};
    });
  }
  if (trace) trace.record({"where", {cond_arg, a_arg, b_arg}, {out}, {int64_t(ct)}, {}});  // ints: compute dtype
  return out;
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  LOOM_CHECK(mask.dtype() == kBool, DTypeError, "masked_fill: mask must be bool, got ", dtype_name(mask.dtype()));
  LOOM_CHECK(broadcast_shapes(sizes(), mask.sizes(), "masked_fill") == sizes(), ShapeError,
             "masked_fill: mask of shape ", shape_str(mask.sizes()), " does not broadcast to ", shape_str(sizes()));
  return where(mask, scalar_tensor(value, options()), *this);
}

Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  if (needs_grad(*this)) {
    // From a clone, so the tensors the backward saves are not the ones overwritten.
    Tensor result = clone().masked_fill(mask, value);
    rebase_history(*this, result.grad_fn(), "masked_fill_");  // may throw: before the write
    {
      NoGradGuard no_grad;
      kernels::copy(*this, result);
    }
    bump_version();
    return *this;
  }
  kernels::copy(*this, masked_fill(mask, value));
  bump_version();
  return *this;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes()) return false;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
  }
  return true;
}

// ---- operators --------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator+(const Tensor& a, Scalar b) { return a.add(b); }
Tensor operator-(const Tensor& a, Scalar b) { return a.sub(b); }
Tensor operator*(const Tensor& a, Scalar b) { return a.mul(b); }
Tensor operator/(const Tensor& a, Scalar b) { return a.div(b); }
Tensor operator+(Scalar a, const Tensor& b) { return b.add(a); }
Tensor operator-(Scalar a, const Tensor& b) { return binary_op(BinaryOp::Sub, scalar_like(b, a, BinaryOp::Sub), b); }
Tensor operator*(Scalar a, const Tensor& b) { return b.mul(a); }
Tensor operator/(Scalar a, const Tensor& b) { return binary_op(BinaryOp::Div, scalar_like(b, a, BinaryOp::Div), b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator<(const Tensor& a, Scalar b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, Scalar b) { return a.le(b); }
Tensor operator>(const Tensor& a, Scalar b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, Scalar b) { return a.ge(b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

}  // namespace loom
