#include "nn/functional.h"

#include "autograd/autocast.h"
#include "autograd/functions/layer_norm.h"
#include "autograd/functions/linear.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/layer_norm.h"

namespace loom::nn::functional {

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const trace::OpScope trace;  // recorded whole: Gemm, or MatMul + Add (Note [op tracing], core/trace.h)
  // Under autocast all three in the lower precision: the bias add too (Note [autocast]).
  const std::vector<Tensor> cast = autocast::cast_inputs("linear", {x_in, weight_in, bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  LOOM_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D (out, in), got shape ",
             shape_str(weight.sizes()));
  LOOM_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError, "linear: input of shape ",
             shape_str(x.sizes()), " does not end in in_features = ", weight.size(1), " (weight ",
             shape_str(weight.sizes()), ")");
  Tensor out;
  if (!bias.defined()) {
    out = x.matmul(weight.t());  // (..., out)
    if (trace) trace.record({"linear", {x_in, weight_in, bias_in}, {out}, {}, {}});
    return out;
  }
  LOOM_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), ShapeError, "linear: bias of shape ",
             shape_str(bias.sizes()), " does not match out_features = ", weight.size(0));
  // One op, the bias added inside the GEMM (autograd/functions/linear.h), where the three
  // agree; otherwise the composition, whose ops name what disagrees.
  const bool fusable = x.is_floating_point() && weight.dtype() == x.dtype() && bias.dtype() == x.dtype() &&
                       weight.device() == x.device() && bias.device() == x.device();
  out = fusable ? fused_linear(x, weight, bias) : x.matmul(weight.t()) + bias;
  if (trace) trace.record({"linear", {x_in, weight_in, bias_in}, {out}, {}, {}});
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) { return ::loom::dropout(x, p, training); }

namespace {

// Checks x against normalized_shape and weight, bias against it; returns the dims it covers.
Dims layer_norm_dims(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias) {
  const int64_t k = int64_t(normalized_shape.size());
  LOOM_CHECK(k >= 1 && x.dim() >= k, ShapeError, "layer_norm: input of shape ", shape_str(x.sizes()),
             " cannot be normalised over ", shape_str(normalized_shape));
  Dims dims;
  for (int64_t i = 0; i < k; ++i) {
    LOOM_CHECK(x.size(x.dim() - k + i) == normalized_shape[size_t(i)], ShapeError,
               "layer_norm: input of shape ", shape_str(x.sizes()), " does not end in normalized_shape ",
               shape_str(normalized_shape));
    dims.push_back(x.dim() - k + i);
  }
  for (const auto& [t, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}})
    LOOM_CHECK(!t->defined() || t->sizes() == normalized_shape, ShapeError, "layer_norm: ", name, " of shape ",
               shape_str(t->sizes()), " does not match normalized_shape ", shape_str(normalized_shape));
  return dims;
}

// Whether the fused kernels take these operands: x's device has them, one device, and
// weight and bias of x's dtype (or float32 for a 16-bit x); other dtypes promote through
// the composition.
bool fused_layer_norm_applies(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t n) {
  if (n == 0 || !is_floating_point(x.dtype()) || !kernels::has_layer_norm_kernels(x)) return false;
  const bool low_precision = x.dtype() == kFloat16 || x.dtype() == kBFloat16;
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && (t->device() != x.device() ||
                         !(t->dtype() == x.dtype() || (low_precision && t->dtype() == kFloat32))))
      return false;
  return true;
}

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const trace::OpScope trace;
  const std::vector<Tensor> cast = autocast::cast_inputs("layer_norm", {x_in, weight_in, bias_in});  // Note [autocast]
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  layer_norm_dims(x, normalized_shape, weight, bias);
  int64_t n = 1;
  for (int64_t s : normalized_shape) n *= s;
  // Note [fused layer norm] (kernels/cpu/layer_norm.cpp)
  Tensor out = fused_layer_norm_applies(x, weight, bias, n) ? fused_layer_norm(x, weight, bias, n, eps)
                                                            : detail::layer_norm_reference(x, normalized_shape, weight, bias, eps);
  if (trace)  // ints: how many trailing dims are normalized
    trace.record({"layer_norm", {x_in, weight_in, bias_in}, {out}, {int64_t(normalized_shape.size())}, {eps}});
  return out;
}

namespace detail {

Tensor layer_norm_reference(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                            double eps) {
  const Dims dims = layer_norm_dims(x, normalized_shape, weight, bias);
  // 16-bit floats normalise in float32 and round once at the end, as PyTorch (rounding the
  // mean, variance and rsqrt to 16 bits each would lose several bits of the result).
  const bool low_precision = x.dtype() == kFloat16 || x.dtype() == kBFloat16;
  auto opmath = [&](const Tensor& t) { return low_precision && t.defined() ? t.to(kFloat32) : t; };
  const Tensor xo = opmath(x);
  Tensor mean = xo.mean(dims, /*keepdim=*/true);
  Tensor centered = xo - mean;
  Tensor var = (centered * centered).mean(dims, /*keepdim=*/true);  // biased, as PyTorch
  Tensor y = centered * (var + eps).rsqrt();
  if (weight.defined()) y = y * opmath(weight);
  if (bias.defined()) y = y + opmath(bias);
  return y.to(x.dtype());
}

}  // namespace detail

}  // namespace loom::nn::functional
