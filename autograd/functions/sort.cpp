// sort, argsort and topk along a dim: values with their int64 indices, in the order of
// Note [sort order] (kernels/math/sort_math.h: stable, NaN largest, topk ties to the lowest
// index). The values' gradient goes back to the positions they came from.
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

// The first k values of x's sorted order along dim, with their positions; no history.
// x has at least one dim.
std::pair<Tensor, Tensor> first_k_sorted(const Tensor& x, int64_t dim, int64_t k, bool descending) {
  const int64_t last = x.dim() - 1, n = x.size(dim);
  int64_t rows = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) rows *= x.size(d);
  // The kernel sorts contiguous rows: the sorted dim moved last, (rows, n).
  const Tensor moved = (dim == last ? x : x.transpose(dim, last)).contiguous();
  Shape out_shape = moved.sizes();
  out_shape.back() = k;
  Tensor values = empty(out_shape, x.options());
  Tensor indices = empty(out_shape, TensorOptions(kInt64).device(x.device()));
  if (rows > 0 && k > 0)
    kernels::sort(alias_with(values, {rows, k}, {k, 1}, 0), alias_with(indices, {rows, k}, {k, 1}, 0),
                  alias_with(moved, {rows, n}, {n, 1}, moved.storage_offset()), descending);
  if (dim == last) return {values, indices};
  return {values.transpose(dim, last).contiguous(), indices.transpose(dim, last).contiguous()};
}

// k = -1: the whole dim (sort). A 0-dim tensor sorts as one element.
std::pair<Tensor, Tensor> sorted_along(const Tensor& self, int64_t dim_in, int64_t k, bool descending,
                                       const char* op, const char* backward_name) {
  const int64_t dim = checked_dim(self, dim_in, op);
  const Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  const int64_t n = x.size(dim);
  if (k < 0) k = n;
  LOOM_CHECK(k <= n, ValueError, op, ": k = ", k, " is out of range for dim ", dim, " of size ", n,
             " (tensor of shape ", shape_str(self.sizes()), "; expected 0 <= k <= ", n, ")");
  auto [values, indices] = first_k_sorted(x.detach(), dim, k, descending);
  if (needs_grad(x)) {
    const Shape shape = x.sizes();
    record(backward_name, {x}, {values}, {indices}, [dim, shape](BackwardContext& ctx) {
      // dx (x's shape) = 0, plus g at the positions the values came from. The indices of
      // one slice are distinct, so each position gets at most one gradient.
      const Tensor& g = ctx.grad();
      Tensor dx = zeros(shape, g.options());
      kernels::scatter_add(dx, dim, ctx.saved[0], g);
      return std::vector<Tensor>{dx};
    });
  }
  if (self.dim() == 0 && k == 1) return {values.reshape({}), indices.reshape({})};
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending, bool /*stable*/) const {
  // Always stable: an unstable sort may return any order of ties, this one included.
  return sorted_along(*this, dim, -1, descending, "sort", "SortBackward");
}

Tensor Tensor::argsort(int64_t dim, bool descending, bool stable) const {
  return detach().sort(dim, descending, stable).second;
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool /*sorted*/) const {
  // Always sorted: PyTorch leaves the order unspecified when sorted = false.
  LOOM_CHECK(k >= 0, ValueError, "topk: k must be non-negative, got ", k, " (tensor of shape ",
             shape_str(sizes()), ")");
  return sorted_along(*this, dim, k, largest, "topk", "TopkBackward");
}

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return x.sort(dim, descending, stable);
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) { return x.argsort(dim, descending, stable); }
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return x.topk(k, dim, largest, sorted);
}

}  // namespace loom
