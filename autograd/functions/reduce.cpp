// sum and mean over all or given dims, and the dim helpers every reduction shares.
#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {

int64_t checked_dim(const Tensor& t, int64_t dim, const char* op) {
  const int64_t n = std::max<int64_t>(t.dim(), 1);
  LOOM_CHECK(dim >= -n && dim < n, IndexError, op, ": dim ", dim, " is out of range for a tensor of shape ",
             shape_str(t.sizes()), " (expected [", -n, ", ", n - 1, "])");
  return wrap_dim(dim, t.dim(), op);
}

Dims reduction_dims(const Tensor& t, const Dims& dims, const char* op) {
  Dims out;
  if (dims.empty()) {
    for (int64_t d = 0; d < t.dim(); ++d) out.push_back(d);
    return out;
  }
  const int64_t n = std::max<int64_t>(t.dim(), 1);
  for (int64_t d : dims) {
    LOOM_CHECK(d >= -n && d < n, IndexError, op, ": dimension ", d, " is out of range for a tensor of shape ",
               shape_str(t.sizes()), " (expected [", -n, ", ", n - 1, "])");
    out.push_back(wrap_dim(d, t.dim(), op));
  }
  std::sort(out.begin(), out.end());
  LOOM_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), ValueError, op, ": dim list ",
             shape_str(dims), " repeats a dim (tensor of shape ", shape_str(t.sizes()), ")");
  if (t.dim() == 0) out.clear();  // dim 0 / -1 of a scalar: nothing to reduce
  return out;
}

Shape reduced_shape(const Shape& shape, const Dims& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    const bool r = std::binary_search(dims.begin(), dims.end(), d);
    if (!r) out.push_back(shape[size_t(d)]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor unsqueeze_dims(const Tensor& g, const Dims& dims, bool keepdim) {
  if (keepdim) return g;
  Shape shape = g.sizes();
  for (int64_t d : dims) shape.insert(shape.begin() + d, 1);  // dims are sorted ascending
  return g.reshape(shape);
}

namespace {

// Sum or mean; integer and bool inputs sum in int64 (as PyTorch), mean needs floats.
Tensor sum_or_mean(const Tensor& self, const Dims& dims_in, bool keepdim, bool mean) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const kernels::ReduceOp op = mean ? kernels::ReduceOp::Mean : kernels::ReduceOp::Sum;
  const char* name = kernels::op_info(op).name;
  LOOM_CHECK(!mean || self.is_floating_point(), DTypeError, name, ": expected a floating-point tensor, got ",
             dtype_name(self.dtype()), " (convert with .to(loom::kFloat32))");
  const Dims dims = reduction_dims(self, dims_in, name);
  Tensor x = self.is_floating_point() ? autocast::cast_input(self, kernels::op_info(op).autocast) : self.to(kInt64);
  Tensor out;
  if (dims.empty()) {
    out = x.clone();
  } else {
    out = empty(reduced_shape(x.sizes(), dims, false), x.options());
    kernels::reduce(op, out, x, dims);
    if (keepdim) out = alias_with(out, reduced_shape(x.sizes(), dims, true),
                                  contiguous_strides(reduced_shape(x.sizes(), dims, true)), 0);
  }
  if (needs_grad(x) && !dims.empty()) {
    int64_t count = 1;
    for (int64_t d : dims) count *= x.size(d);
    Shape in_shape = x.sizes();
    record(kernels::op_info(op).backward_name, {x}, {out}, {},
           [=](BackwardContext& ctx) {
             // g broadcasts back over the reduced dims: d sum / dx = 1, d mean / dx = 1 / count.
             Tensor g = unsqueeze_dims(ctx.grad(), dims, keepdim);
             if (mean) g = g / double(count);
             return std::vector<Tensor>{g.expand(in_shape)};
           });
  }
  if (trace) {  // ints: keepdim, then the reduced dims (none: all of them)
    std::vector<int64_t> ints{keepdim};
    ints.insert(ints.end(), dims.begin(), dims.end());
    trace.record({name, {self}, {out}, ints, {}});
  }
  return out;
}

}  // namespace

Tensor Tensor::sum() const { return sum_or_mean(*this, {}, false, false); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return sum_or_mean(*this, {dim}, keepdim, false); }
Tensor Tensor::sum(const Dims& dims, bool keepdim) const { return sum_or_mean(*this, dims, keepdim, false); }
Tensor Tensor::all() const {
  NoGradGuard no_grad;
  return logical_not().sum().eq(0);  // a count of zeros (int64): none
}
Tensor Tensor::any() const {
  NoGradGuard no_grad;
  return logical_not().logical_not().sum() > 0;
}
Tensor Tensor::mean() const { return sum_or_mean(*this, {}, false, true); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return sum_or_mean(*this, {dim}, keepdim, true); }
Tensor Tensor::mean(const Dims& dims, bool keepdim) const { return sum_or_mean(*this, dims, keepdim, true); }

}  // namespace loom
