// Linear with a bias as one op: one GEMM accumulating into the broadcast bias, one node
// (LinearBackward: dx = dy · W, dW = dy^T · x over all rows, db = dy summed over rows).
#include "autograd/functions/linear.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {

Tensor fused_linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const int64_t K = weight_in.size(1), N = weight_in.size(0), rows = leading_numel(x_in);
  Shape out_shape(x_in.sizes().begin(), x_in.sizes().end() - 1);
  out_shape.push_back(N);  // (..., N)
  Tensor y = empty(out_shape, x_in.options());
  {
    NoGradGuard no_grad;  // internal views: the op records one node
    const Tensor y2 = y.view({rows, N});                                 // (rows, N)
    kernels::copy(y2, bias_in.detach().unsqueeze(0).expand({rows, N}));  // y = bias
    const Tensor x2 = x_in.detach().reshape({rows, K});                  // (rows, K)
    kernels::bmm(y2.unsqueeze(0), x2.unsqueeze(0), weight_in.detach().t().unsqueeze(0), /*beta=*/1);
  }
  if (needs_grad(x_in, weight_in, bias_in)) {
    const Shape x_shape = x_in.sizes();
    auto backward = [x_shape, rows, K, N](BackwardContext& ctx) {
      const Tensor& x = ctx.saved[0];       // (..., K)
      const Tensor& weight = ctx.saved[1];  // (N, K)
      const Tensor dy = ctx.grad().reshape({rows, N});  // (rows, N)
      Tensor dx, dw, db;
      if (ctx.needs(0)) dx = dy.matmul(weight).reshape(x_shape);      // (rows, K) -> x's shape
      if (ctx.needs(1)) dw = dy.t().matmul(x.reshape({rows, K}));  // (N, K)
      if (ctx.needs(2)) db = dy.sum(0);                               // (N)
      return std::vector<Tensor>{dx, dw, db};
    };
    record("LinearBackward", {x_in, weight_in, bias_in}, {y}, {x_in, weight_in}, backward);
  }
  return y;
}

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
  LOOM_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), ShapeError,
             "linear: bias of shape ", shape_str(bias.sizes()), " does not match out_features = ", weight.size(0));
  // With a bias, one op, the bias added inside the GEMM (autograd/functions/linear.h), where
  // the three agree; otherwise the composition, whose ops name what disagrees.
  const bool fusable = bias.defined() && x.is_floating_point() && weight.dtype() == x.dtype() &&
                       bias.dtype() == x.dtype() && weight.device() == x.device() && bias.device() == x.device();
  const Tensor out = !bias.defined() ? x.matmul(weight.t())  // (..., out)
                     : fusable       ? fused_linear(x, weight, bias)
                                     : x.matmul(weight.t()) + bias;
  if (trace) trace.record({"linear", {x_in, weight_in, bias_in}, {out}, {}, {}});
  return out;
}

}  // namespace loom
