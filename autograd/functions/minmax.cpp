// max and min (of all elements, or along a dim with their indices), argmax and argmin.
#include <algorithm>
#include <numeric>

#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

Tensor extremum_all(const Tensor& self, bool is_max) {
  const kernels::ReduceOp op = is_max ? kernels::ReduceOp::Max : kernels::ReduceOp::Min;
  const char* name = kernels::op_info(op).name;
  LOOM_CHECK(self.numel() > 0, ValueError, name, ": the tensor of shape ", shape_str(self.sizes()),
             " is empty and has no ", name, " (reduce along a non-empty dim instead)");
  // The reduce kernel takes no bool; a bool max is the max of its 0/1 values.
  const Tensor x = self.dtype() == kBool ? self.to(kInt32) : self;
  const Tensor flat = x.dim() == 0 ? x.detach().reshape({1}) : x;
  Dims all(size_t(flat.dim()));
  std::iota(all.begin(), all.end(), 0);
  Tensor out = empty({}, x.options());
  kernels::reduce(op, out, flat, all);
  if (self.dtype() == kBool) return out.to(kBool);
  if (needs_grad(x)) {
    record(kernels::op_info(op).backward_name, {x}, {out}, {x, out.detach()}, [](BackwardContext& ctx) {
      // Tied extrema share the gradient evenly (PyTorch's amax rule); a NaN result goes to the NaNs.
      const Tensor& x = ctx.saved[0];
      const Tensor& y = ctx.saved[1];
      Tensor hit = where(y.ne(y), x.ne(x), x.eq(y)).to(x.dtype());
      return std::vector<Tensor>{hit * (ctx.grad() / hit.sum())};
    });
  }
  return out;
}

struct ArgResult {
  Tensor x;  // the input the kernel read (self, or self as 1-D when 0-dim)
  Tensor values, indices;
  int64_t dim;
};

// Values and indices of the max (or min) along dim, with keepdim applied. No history.
ArgResult arg_extremum(const Tensor& self, int64_t dim_in, bool keepdim, bool is_max, const char* name) {
  const int64_t dim = checked_dim(self, dim_in, name);
  const Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  LOOM_CHECK(x.size(dim) > 0, ValueError, name, ": cannot reduce dim ", dim, " of size 0 (tensor of shape ",
             shape_str(self.sizes()), "): the ", name, " of no elements is undefined");
  const Shape shape = reduced_shape(x.sizes(), {dim}, false);
  Tensor values = empty(shape, x.options());
  Tensor indices = empty(shape, TensorOptions(kInt64).device(x.device()));
  kernels::arg_reduce(is_max, values, indices, x, dim);
  const Shape final_shape = self.dim() == 0 ? Shape{} : reduced_shape(x.sizes(), {dim}, keepdim);
  values = alias_with(values, final_shape, contiguous_strides(final_shape), 0);
  indices = alias_with(indices, final_shape, contiguous_strides(final_shape), 0);
  return {x, values, indices, dim};
}

std::pair<Tensor, Tensor> extremum_dim(const Tensor& self, int64_t dim_in, bool keepdim, bool is_max) {
  ArgResult r = arg_extremum(self, dim_in, keepdim, is_max, is_max ? "max" : "min");
  if (needs_grad(r.x)) {
    const int64_t dim = r.dim;
    const kernels::ReduceOp op = is_max ? kernels::ReduceOp::Max : kernels::ReduceOp::Min;
    record(kernels::op_info(op).backward_name, {r.x}, {r.values}, {r.x, r.indices},
           [dim, keepdim](BackwardContext& ctx) {
             // The gradient goes to the chosen index of each slice: positions along dim
             // (shaped to broadcast there) are compared with the indices.
             const Tensor& x = ctx.saved[0];
             const Tensor idx = unsqueeze_dims(ctx.saved[1], {dim}, keepdim);
             const Tensor g = unsqueeze_dims(ctx.grad(), {dim}, keepdim);
             Shape along(size_t(x.dim()), 1);
             along[size_t(dim)] = x.size(dim);
             const Tensor hit = arange(x.size(dim), TensorOptions(kInt64).device(x.device())).view(along).eq(idx);
             return std::vector<Tensor>{where(hit, g, zeros({}, g.options()))};
           });
  }
  return {r.values, r.indices};
}

Tensor arg_flat(const Tensor& self, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  LOOM_CHECK(self.numel() > 0, ValueError, name, ": the tensor of shape ", shape_str(self.sizes()),
             " is empty and has no ", is_max ? "max" : "min");
  return arg_extremum(self.detach().reshape({-1}), 0, false, is_max, name).indices;
}

}  // namespace

Tensor Tensor::max() const { return extremum_all(*this, true); }
Tensor Tensor::min() const { return extremum_all(*this, false); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return extremum_dim(*this, dim, keepdim, true); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return extremum_dim(*this, dim, keepdim, false); }
Tensor Tensor::argmax() const { return arg_flat(*this, true); }
Tensor Tensor::argmin() const { return arg_flat(*this, false); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return arg_extremum(detach(), dim, keepdim, true, "argmax").indices; }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return arg_extremum(detach(), dim, keepdim, false, "argmin").indices; }

}  // namespace loom
