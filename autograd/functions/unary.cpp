// Elementwise unary ops and their backward formulas; fill_, zero_, clamp.
#include <limits>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/kernels.h"
#include "kernels/math/functors.h"

namespace loom {

using kernels::BinaryOp;
using kernels::OpDTypes;
using kernels::Saves;
using kernels::UnaryOp;

namespace {

// out = grad op b through a fused binary kernel (TanhBackward etc.).
Tensor fused_backward(BinaryOp op, const Tensor& g, const Tensor& b) {
  Tensor out = empty(g.sizes(), g.options());
  kernels::binary(op, out, g, broadcast_to_shape(b, g.sizes(), "backward"));
  return out;
}

// The gradient of op's input; x and y are its saved input and output (undefined unless the
// op's row says its node saves them).
std::vector<Tensor> unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y,
                                   double arg0, double arg1) {
  switch (op) {
    case UnaryOp::Neg: return {-g};
    case UnaryOp::Abs: return {g * x.sign()};
    case UnaryOp::Exp: return {g * y};
    case UnaryOp::Log: return {g / x};
    case UnaryOp::Log1p: return {g / (x + 1.0)};
    case UnaryOp::Sqrt: return {g / (y * 2.0)};
    case UnaryOp::Rsqrt: return {g * y * y * y * (-0.5)};
    case UnaryOp::Sin: return {g * x.cos()};
    case UnaryOp::Cos: return {-(g * x.sin())};
    case UnaryOp::Tanh: return {fused_backward(BinaryOp::TanhBackward, g, y)};
    case UnaryOp::Sigmoid: return {fused_backward(BinaryOp::SigmoidBackward, g, y)};
    case UnaryOp::Relu: return {fused_backward(BinaryOp::ReluBackward, g, y)};
    case UnaryOp::Gelu: return {fused_backward(BinaryOp::GeluBackward, g, x)};
    case UnaryOp::GeluTanh: return {fused_backward(BinaryOp::GeluTanhBackward, g, x)};
    case UnaryOp::Silu: return {fused_backward(BinaryOp::SiluBackward, g, x)};
    case UnaryOp::Clamp: return {where((x >= arg0) * (x <= arg1), g, zeros({}, g.options()))};
    case UnaryOp::PowScalar:
      return {arg0 == 0 ? zeros_like(g) : g * x.pow(arg0 - 1) * arg0};
    case UnaryOp::AddScalar: return {g};
    case UnaryOp::MulScalar: return {g * arg0};
    case UnaryOp::NanToNum: return {where(x.isfinite(), g, zeros({}, g.options()))};
    default: return {Tensor()};  // not differentiable: no node is recorded
  }
}

Tensor unary_op(UnaryOp op, const Tensor& x_in, double arg0 = 0, double arg1 = 0, double arg2 = 0) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const kernels::UnaryOpInfo& info = kernels::op_info(op);  // Note [op tables]
  const char* name = info.name;
  LOOM_CHECK(x_in.defined(), ValueError, name, ": called on an undefined tensor");
  Tensor x = x_in;
  if (info.dtypes == OpDTypes::Floating && !x.is_floating_point()) x = x.to(kFloat32);  // as PyTorch
  x = autocast::cast_input(x, info.autocast);  // Note [autocast]
  LOOM_CHECK(!(x.dtype() == kBool && info.dtypes == OpDTypes::Numeric), DTypeError, name,
             ": not supported for bool tensors");
  Tensor out = empty(x.sizes(), info.dtypes == OpDTypes::AllToBool ? x.options().dtype(kBool) : x.options());
  kernels::unary(op, out, x, arg0, arg1, arg2);
  if (info.backward_name && needs_grad(x)) {
    // Only what the formula reads is saved: an in-place change to anything else is no error.
    const bool save_x = info.saves == Saves::Input || info.saves == Saves::Both;
    const bool save_y = info.saves == Saves::Output || info.saves == Saves::Both;
    record(info.backward_name, {x}, {out}, {save_x ? x : Tensor(), save_y ? out.detach() : Tensor()},
           [op, arg0, arg1](BackwardContext& ctx) {
             return unary_backward(op, ctx.grad(), ctx.saved[0], ctx.saved[1], arg0, arg1);
           });
  }
  if (trace) trace.record({name, {x_in}, {out}, {int64_t(op)}, {arg0, arg1, arg2}});  // ints: the UnaryOp
  return out;
}

}  // namespace

Tensor Tensor::neg() const { return unary_op(UnaryOp::Neg, *this); }
Tensor Tensor::abs() const { return unary_op(UnaryOp::Abs, *this); }
Tensor Tensor::exp() const { return unary_op(UnaryOp::Exp, *this); }
Tensor Tensor::log() const { return unary_op(UnaryOp::Log, *this); }
Tensor Tensor::log1p() const { return unary_op(UnaryOp::Log1p, *this); }
Tensor Tensor::sqrt() const { return unary_op(UnaryOp::Sqrt, *this); }
Tensor Tensor::rsqrt() const { return unary_op(UnaryOp::Rsqrt, *this); }
Tensor Tensor::sin() const { return unary_op(UnaryOp::Sin, *this); }
Tensor Tensor::cos() const { return unary_op(UnaryOp::Cos, *this); }
Tensor Tensor::tanh() const { return unary_op(UnaryOp::Tanh, *this); }
Tensor Tensor::sigmoid() const { return unary_op(UnaryOp::Sigmoid, *this); }
Tensor Tensor::relu() const { return unary_op(UnaryOp::Relu, *this); }
Tensor Tensor::gelu(bool tanh_approximation) const {
  return unary_op(tanh_approximation ? UnaryOp::GeluTanh : UnaryOp::Gelu, *this);
}
Tensor Tensor::silu() const { return unary_op(UnaryOp::Silu, *this); }
Tensor Tensor::sign() const { return unary_op(UnaryOp::Sign, *this); }
Tensor Tensor::logical_not() const { return unary_op(UnaryOp::LogicalNot, *this); }
Tensor Tensor::isfinite() const { return unary_op(UnaryOp::IsFinite, *this); }
Tensor Tensor::isnan() const { return unary_op(UnaryOp::IsNan, *this); }
Tensor Tensor::isinf() const { return unary_op(UnaryOp::IsInf, *this); }

Tensor Tensor::nan_to_num(double nan, std::optional<double> posinf, std::optional<double> neginf) const {
  LOOM_CHECK(defined(), ValueError, "nan_to_num: called on an undefined tensor");
  if (!is_floating_point()) return clone();  // nothing to replace, as PyTorch
  const double largest = dtype() == kFloat16    ? 65504.0
                         : dtype() == kBFloat16 ? 3.3895313892515355e38  // (2 - 2^-7) * 2^127
                         : dtype() == kFloat32  ? double(std::numeric_limits<float>::max())
                                                : std::numeric_limits<double>::max();
  return unary_op(UnaryOp::NanToNum, *this, nan, posinf.value_or(largest), neginf.value_or(-largest));
}

Tensor Tensor::pow(Scalar exponent) const {
  if (!exponent.is_integral() && !is_floating_point()) return to(kFloat32).pow(exponent);
  LOOM_CHECK(is_floating_point() || exponent.to_int() >= 0, ValueError,
             "pow: integer tensors cannot be raised to the negative power ", exponent.to_int());
  return unary_op(UnaryOp::PowScalar, *this, exponent.to_double());
}

Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  LOOM_CHECK(min || max, ValueError, "clamp: at least one of min and max must be given");
  const double lo = min ? min->to_double() : -std::numeric_limits<double>::infinity();
  const double hi = max ? max->to_double() : std::numeric_limits<double>::infinity();
  LOOM_CHECK(!(min && max) || lo <= hi, ValueError, "clamp: min ", lo, " is greater than max ", hi);
  const bool float_bound = (min && !min->is_integral()) || (max && !max->is_integral());
  if (!is_floating_point() && float_bound) return to(kFloat32).clamp(min, max);  // as PyTorch
  if (!is_floating_point()) {  // integer bounds saturate at the type's range
    const double tmin = dtype() == kInt32 ? double(std::numeric_limits<int32_t>::min()) : -9.2e18;
    const double tmax = dtype() == kInt32 ? double(std::numeric_limits<int32_t>::max()) : 9.2e18;
    return unary_op(UnaryOp::Clamp, *this, std::max(lo, tmin), std::min(hi, tmax));
  }
  return unary_op(UnaryOp::Clamp, *this, lo, hi);
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  check_inplace(*this, "clamp_");
  // With autograd, from a clone: ClampBackward saves its input, which is overwritten here.
  Tensor result = (needs_grad(*this) ? clone() : *this).clamp(min, max);
  LOOM_CHECK(result.dtype() == dtype(), DTypeError, "clamp_: result dtype ", dtype_name(result.dtype()),
             " cannot be stored in the ", dtype_name(dtype()), " tensor being updated in place");
  if (result.grad_fn()) rebase_history(*this, result.grad_fn(), "clamp_");  // before the write
  {
    NoGradGuard no_grad;
    kernels::copy(*this, result);
  }
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  check_inplace(*this, "fill_");
  if (requires_grad() && GradMode::is_enabled()) {  // may throw: before the write
    auto node = record("FillBackward", {*this}, {}, {}, [](BackwardContext& ctx) {
      return std::vector<Tensor>{zeros_like(ctx.grad())};
    });
    rebase_history(*this, node, "fill_");
  }
  kernels::fill(*this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace loom
