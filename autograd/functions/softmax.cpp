// softmax and log_softmax along a dim (forward and backward in kernels/cpu/softmax.cpp).
#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

Tensor softmax_op(const Tensor& x_in, int64_t dim_in, bool log) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const char* name = log ? "log_softmax" : "softmax";
  const Tensor x = autocast::cast_inputs(name, {x_in})[0];  // Note [autocast]
  LOOM_CHECK(x.is_floating_point(), DTypeError, name, ": expected a floating-point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.sizes()), " (convert with .to(loom::kFloat32))");
  const int64_t n = std::max<int64_t>(x.dim(), 1);
  LOOM_CHECK(dim_in >= -n && dim_in < n, IndexError, name, ": dim ", dim_in,
             " is out of range for a tensor of shape ", shape_str(x.sizes()), " (expected [", -n, ", ", n - 1, "])");
  const int64_t dim = wrap_dim(dim_in, x.dim(), name);
  Tensor out = empty(x.sizes(), x.options());
  kernels::softmax(out, x, dim, log);
  if (needs_grad(x)) {
    record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {x}, {out}, {out.detach()},
           [dim, log](BackwardContext& ctx) {
             const Tensor& y = ctx.saved[0];
             Tensor gx = empty(y.sizes(), y.options());
             kernels::softmax_backward(gx, ctx.grad(), y, dim, log);
             return std::vector<Tensor>{gx};
           });
  }
  if (trace) trace.record({name, {x_in}, {out}, {dim}, {}});
  return out;
}

}  // namespace

Tensor Tensor::softmax(int64_t dim) const { return softmax_op(*this, dim, false); }
Tensor Tensor::log_softmax(int64_t dim) const { return softmax_op(*this, dim, true); }
Tensor softmax(const Tensor& x, int64_t dim) { return x.softmax(dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return x.log_softmax(dim); }

}  // namespace loom
