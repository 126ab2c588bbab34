// Fused layer norm: the forward saves each row's mean and rstd, the backward computes the
// gradients of x, weight and bias in one kernel (Note [fused layer norm] in
// kernels/cpu/layer_norm.cpp).
#include "autograd/functions/layer_norm.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "kernels/layer_norm.h"

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

}  // namespace loom
