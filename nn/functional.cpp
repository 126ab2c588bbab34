#include "nn/functional.h"

#include "autograd/autocast.h"
#include "core/factories.h"
#include "core/ops.h"

namespace loom::nn::functional {

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  // Under autocast all three in the lower precision: the bias add too (Note [autocast]).
  const std::vector<Tensor> cast = autocast::cast_inputs("linear", {x_in, weight_in, bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  LOOM_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D (out, in), got shape ",
             shape_str(weight.sizes()));
  LOOM_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError, "linear: input of shape ",
             shape_str(x.sizes()), " does not end in in_features = ", weight.size(1), " (weight ",
             shape_str(weight.sizes()), ")");
  Tensor y = x.matmul(weight.t());  // (..., out)
  if (bias.defined()) {
    LOOM_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), ShapeError, "linear: bias of shape ",
               shape_str(bias.sizes()), " does not match out_features = ", weight.size(0));
    y = y + bias;
  }
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training) { return ::loom::dropout(x, p, training); }

Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  const std::vector<Tensor> cast = autocast::cast_inputs("layer_norm", {x_in, weight_in, bias_in});  // Note [autocast]
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
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

}  // namespace loom::nn::functional
