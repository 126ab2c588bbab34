// Statistics over dims: var, std, logsumexp, norm; and the running sum, cumsum.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

// The IndexError names the op and the shape.
void check_dims(const Tensor& t, const Dims& dims, const char* op) {
  const int64_t n = std::max<int64_t>(t.dim(), 1);
  for (int64_t d : dims)
    LOOM_CHECK(d >= -n && d < n, IndexError, op, ": dim ", d, " is out of range for a tensor of shape ",
               shape_str(t.sizes()), " (expected [", -n, ", ", n - 1, "])");
}

void check_floating(const Tensor& t, const char* op) {
  LOOM_CHECK(t.is_floating_point(), DTypeError, op, ": expected a floating-point tensor, got ",
             dtype_name(t.dtype()), " of shape ", shape_str(t.sizes()));
}

struct Reduction {
  Tensor x;         // self, viewed as 1-D when 0-dim so that it has a dim to reduce
  Dims dims;        // sorted, wrapped, never empty
  Shape out_shape;  // with keepdim applied
  int64_t count = 1;  // elements per reduced slice
};

Reduction prepare(const Tensor& self, const Dims& dims, bool keepdim, const char* op) {
  check_dims(self, dims, op);
  Reduction r;
  r.x = self.dim() == 0 ? self.reshape({1}) : self;
  r.dims = reduction_dims(r.x, dims, op);
  r.out_shape = self.dim() == 0 ? Shape{} : reduced_shape(r.x.sizes(), r.dims, keepdim);
  for (int64_t d : r.dims) r.count *= r.x.size(d);
  return r;
}

// A kernel's output (r.x's shape without the dims) viewed with keepdim applied.
Tensor as_output(const Tensor& out, const Reduction& r) {
  return alias_with(out, r.out_shape, contiguous_strides(r.out_shape), 0);
}

Tensor var_forward(const Reduction& r, int64_t correction) {
  Tensor out = empty(reduced_shape(r.x.sizes(), r.dims, false), r.x.options());
  kernels::variance(out, r.x, r.dims, correction);
  return as_output(out, r);
}

// d var / dx = 2 (x - mean) / (count - correction); a divisor <= 0 gives inf/nan, as PyTorch.
Tensor var_backward(const Tensor& grad, const Tensor& x, const Dims& dims, bool keepdim, int64_t correction,
                    int64_t count) {
  const Tensor g = unsqueeze_dims(grad, dims, keepdim);
  return g * (x - x.mean(dims, true)) * (2.0 / double(std::max<int64_t>(count - correction, 0)));
}

// t with dim traversed backwards (a negative-stride view; no history).
Tensor reversed(const Tensor& t, int64_t dim) {
  Shape strides = t.strides();
  const int64_t last = std::max<int64_t>(t.size(dim) - 1, 0);
  strides[size_t(dim)] = -strides[size_t(dim)];
  return alias_with(t, t.sizes(), strides, t.storage_offset() + last * t.stride(dim));
}

// cumsum along dim, or from the end (reverse) for the backward. Each direction's backward
// is the other direction, so gradients of any order stay exact.
Tensor cumsum_op(const Tensor& self, int64_t dim_in, bool reverse) {
  check_dims(self, {dim_in}, "cumsum");
  const int64_t dim = wrap_dim(dim_in, self.dim(), "cumsum");
  const Tensor x = self.is_floating_point() ? self : self.to(kInt64);  // as PyTorch
  Tensor out = empty(x.sizes(), x.options());
  if (reverse && x.dim() > 0) kernels::cumsum(reversed(out, dim), reversed(x, dim), dim);
  else kernels::cumsum(out, x, dim);
  if (needs_grad(x)) {
    record("CumsumBackward", {x}, {out}, {}, [dim, reverse](BackwardContext& ctx) {
      return std::vector<Tensor>{cumsum_op(ctx.grad(), dim, !reverse)};
    });
  }
  return out;
}

}  // namespace

Tensor Tensor::var(const Dims& dims, int64_t correction, bool keepdim) const {
  check_floating(*this, "var");
  const Reduction r = prepare(*this, dims, keepdim, "var");
  Tensor out = var_forward(r, correction);
  if (needs_grad(r.x)) {
    record("VarBackward", {r.x}, {out}, {r.x},
           [dims = r.dims, keepdim, correction, count = r.count](BackwardContext& ctx) {
             return std::vector<Tensor>{var_backward(ctx.grad(), ctx.saved[0], dims, keepdim, correction, count)};
           });
  }
  return out;
}

Tensor Tensor::std(const Dims& dims, int64_t correction, bool keepdim) const {
  check_floating(*this, "std");
  const Reduction r = prepare(*this, dims, keepdim, "std");
  Tensor out = var_forward(r, correction);
  kernels::unary(kernels::UnaryOp::Sqrt, out, out);
  if (needs_grad(r.x)) {
    record("StdBackward", {r.x}, {out}, {r.x, out.detach()},
           [dims = r.dims, keepdim, correction, count = r.count](BackwardContext& ctx) {
             // d std = d var / (2 std); a zero std gives a zero gradient, as PyTorch.
             const Tensor& y = ctx.saved[1];
             const Tensor g = where(y.eq(0), zeros({}, y.options()), ctx.grad() / (y * 2.0));
             return std::vector<Tensor>{var_backward(g, ctx.saved[0], dims, keepdim, correction, count)};
           });
  }
  return out;
}

Tensor Tensor::logsumexp(const Dims& dims, bool keepdim) const {
  const Tensor x = autocast::cast_inputs("logsumexp", {*this})[0];  // Note [autocast]
  const Reduction r = prepare(x.is_floating_point() ? x : x.to(kFloat32), dims, keepdim, "logsumexp");
  Tensor out, out_kept;  // out_kept keeps the reduced dims, to broadcast against x
  {
    NoGradGuard no_grad;
    // log sum exp(x) = m + log sum exp(x - m) with m the max, so no exp overflows. An
    // infinite m would make x - m nan; shifting by 0 there gives the right inf or -inf.
    Tensor m = empty(reduced_shape(r.x.sizes(), r.dims, false), r.x.options());
    kernels::reduce(kernels::ReduceOp::Max, m, r.x, r.dims);
    m = unsqueeze_dims(m, r.dims, false);
    m = where(m.abs().eq(std::numeric_limits<double>::infinity()), zeros({}, m.options()), m);
    out_kept = (r.x - m).exp().sum(r.dims, true).log() + m;
    out = out_kept.reshape(r.out_shape);
  }
  if (needs_grad(r.x)) {
    record("LogsumexpBackward", {r.x}, {out}, {r.x, out_kept.detach()}, [dims = r.dims, keepdim](BackwardContext& ctx) {
      // d/dx = exp(x - logsumexp(x)), the softmax over dims.
      const Tensor g = unsqueeze_dims(ctx.grad(), dims, keepdim);
      return std::vector<Tensor>{g * (ctx.saved[0] - ctx.saved[1]).exp()};
    });
  }
  return out;
}

Tensor Tensor::norm(double p, const Dims& dims, bool keepdim) const {
  check_floating(*this, "norm");
  const Reduction r = prepare(autocast::cast_inputs("norm", {*this})[0], dims, keepdim, "norm");  // Note [autocast]
  LOOM_CHECK(!(std::isinf(p) && r.count == 0), ValueError, "norm: the ", p, "-norm of the empty slices of shape ",
             shape_str(sizes()), " is undefined (no identity)");
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor a = (element_size() == 2 ? r.x.to(kFloat32) : r.x).abs();  // 16-bit: in float
    Tensor n;
    if (std::isinf(p)) {
      n = empty(reduced_shape(a.sizes(), r.dims, false), a.options());
      kernels::reduce(p > 0 ? kernels::ReduceOp::Max : kernels::ReduceOp::Min, n, a, r.dims);
    } else if (p == 0) {
      n = a.ne(0).to(a.dtype()).sum(r.dims);
    } else if (p == 1) {
      n = a.sum(r.dims);
    } else if (p == 2) {
      n = a.square().sum(r.dims).sqrt();
    } else {
      n = a.pow(p).sum(r.dims).pow(1.0 / p);
    }
    out = as_output(n.to(dtype()), r);
  }
  if (needs_grad(r.x)) {
    record("NormBackward", {r.x}, {out}, {r.x, out.detach()}, [p, dims = r.dims, keepdim](BackwardContext& ctx) {
      const Tensor& x = ctx.saved[0];
      const Tensor y = unsqueeze_dims(ctx.saved[1], dims, keepdim);
      const Tensor g = unsqueeze_dims(ctx.grad(), dims, keepdim);
      const Tensor zero = zeros({}, g.options());
      if (p == 0) return std::vector<Tensor>{zeros_like(x)};
      if (std::isinf(p)) {
        // Elements tied at the max (min) |x| share the gradient evenly.
        const Tensor hit = x.abs().eq(y).to(x.dtype());
        return std::vector<Tensor>{x.sign() * hit * (g / hit.sum(dims, true))};
      }
      // d/dx (sum |x|^p)^(1/p) = sign(x) |x|^(p-1) / norm^(p-1); zero where x or the norm is 0.
      const Tensor scaled = where(x.eq(0), zero, x.sign() * x.abs().pow(p - 1));
      return std::vector<Tensor>{scaled * where(y.eq(0), zero, g / y.pow(p - 1))};
    });
  }
  return out;
}

Tensor Tensor::cumsum(int64_t dim) const {
  return cumsum_op(autocast::cast_inputs("cumsum", {*this})[0], dim, false);  // Note [autocast]
}

}  // namespace loom
