// Fused layer norm: the forward saves each row's mean and rstd, the backward computes the
// gradients of x, weight and bias in one kernel (Note [fused layer norm] in
// kernels/cpu/layer_norm.cpp).
#include "autograd/functions/layer_norm.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/norm/layer_norm.h"

namespace loom {

Tensor fused_layer_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, int64_t n, double eps) {
  const Tensor x = x_in.detach().contiguous();
  const Tensor weight = weight_in.defined() ? weight_in.detach().contiguous() : Tensor();
  const Tensor bias = bias_in.defined() ? bias_in.detach().contiguous() : Tensor();
  const int64_t rows = x.numel() / n;
  const Tensor x2 = x.view({rows, n});  // (rows, n)
  Tensor y = empty(x.sizes(), x.options());
  const TensorOptions stats = x.options().dtype(x.dtype() == kFloat64 ? kFloat64 : kFloat32);
  Tensor mean = empty({rows}, stats), rstd = empty({rows}, stats);  // (rows)
  kernels::layer_norm_forward(y.view({rows, n}), mean, rstd, x2, weight, bias, eps);
  if (needs_grad(x_in, weight_in, bias_in)) {
    // What dx and dbias are made like: the input's shape; the bias's, if there is one.
    const Shape shape = x_in.sizes();
    const bool has_bias = bias.defined();
    const Shape bias_shape = has_bias ? bias.sizes() : Shape{};
    const TensorOptions bias_options = has_bias ? bias.options() : x.options();
    std::vector<Tensor> saved = {x2, mean, rstd};
    if (weight.defined()) saved.push_back(weight);
    auto backward = [shape, has_bias, bias_shape, bias_options](BackwardContext& ctx) {
      const std::vector<Tensor>& s = ctx.saved;  // x (rows, n), mean, rstd[, weight]
      const Tensor w = s.size() > 3 ? s[3] : Tensor();
      const Tensor& x = s[0];
      Tensor dx = ctx.needs(0) ? empty(x.sizes(), x.options()) : Tensor();
      Tensor dw = w.defined() && ctx.needs(1) ? empty(w.sizes(), w.options()) : Tensor();
      Tensor db = has_bias && ctx.needs(2) ? empty(bias_shape, bias_options) : Tensor();
      kernels::layer_norm_backward(dx, dw, db, ctx.grad().contiguous().view(x.sizes()), x, s[1], s[2], w);
      return std::vector<Tensor>{dx.defined() ? dx.view(shape) : dx, dw, db};
    };
    record("NativeLayerNormBackward", {x_in, weight_in, bias_in}, {y}, saved, backward);
  }
  return y;
}

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

}  // namespace loom
