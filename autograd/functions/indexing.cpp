// Indexing ops: index_select, gather, scatter_add, tril/triu, embedding and one_hot, with
// their backward formulas (index_select and embedding add rows back, gather scatters).
#include <algorithm>

#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {

namespace {

void check_index_dtype(const Tensor& index, const char* op) {
  LOOM_CHECK(is_integral(index.dtype()), DTypeError, op,
             ": expected an index tensor of dtype int64 or int32, got ", dtype_name(index.dtype()),
             " (index shape ", shape_str(index.sizes()), ")");
}

// Throws IndexError unless every index is in [0, self.size(dim)); the message names the
// op, the dim and self's shape.
void check_index_range(const Tensor& index, const Tensor& self, int64_t dim, const char* op) {
  const std::string what = detail::str(op, " (dim ", dim, " of shape ", shape_str(self.sizes()), ")");
  kernels::check_indices(index, self.size(dim), what.c_str());
}

// zeros(shape).index_add_(dim, index, src), or .scatter_add_ when `scatter`: the backward
// of index_select and embedding, and of gather (backward formulas run without grad mode,
// so it records no history).
Tensor add_into_zeros(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src,
                      bool scatter) {
  Tensor out = zeros(shape, src.options());
  if (scatter) kernels::scatter_add(out, dim, index, src);
  else kernels::index_add(out, dim, index, src);
  return out;
}

// Records the backward of out = self.index_select / self.gather(dim, index): the gradient
// added back into zeros of self's shape.
void record_add_back(const char* name, const Tensor& self, const Tensor& out, int64_t dim,
                     const Tensor& index, bool scatter) {
  if (!needs_grad(self)) return;
  Shape in_shape = self.sizes();
  record(name, {self}, {out}, {index}, [=](BackwardContext& ctx) {
    return std::vector<Tensor>{add_into_zeros(in_shape, dim, ctx.saved[0], ctx.grad(), scatter)};
  });
}

// gather and scatter_add: index has self's dim count and fits in self outside `dim`.
void check_gather_shapes(const Tensor& self, int64_t dim, const Tensor& index, const char* op) {
  LOOM_CHECK(index.dim() == self.dim(), ShapeError, op, ": index ", shape_str(index.sizes()),
             " and self ", shape_str(self.sizes()), " must have the same number of dims");
  for (int64_t d = 0; d < self.dim(); ++d) {
    LOOM_CHECK(d == dim || index.size(d) <= self.size(d), ShapeError, op, ": index ",
               shape_str(index.sizes()), " is larger than self ", shape_str(self.sizes()),
               " in dim ", d, " (only dim ", dim, " may be)");
  }
}

}  // namespace

Tensor Tensor::index_select(int64_t dim_, const Tensor& index) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  check_index_dtype(index, "index_select");
  check_same_device("index_select", {this, &index});
  LOOM_CHECK(dim() > 0, ShapeError, "index_select: cannot index a 0-dim tensor");
  LOOM_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 0-D or 1-D, got shape ",
             shape_str(index.sizes()), " (self shape ", shape_str(sizes()), ")");
  const int64_t d = wrap_dim(dim_, dim(), "index_select");
  check_index_range(index, *this, d, "index_select");
  Shape shape = sizes();
  shape[size_t(d)] = index.numel();
  Tensor out = empty(shape, options());
  kernels::index_select(out, *this, d, index);
  record_add_back("IndexSelectBackward", *this, out, d, index, /*scatter=*/false);
  if (trace) trace.record({"index_select", {*this, index}, {out}, {d}, {}});
  return out;
}

Tensor Tensor::gather(int64_t dim_, const Tensor& index) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  check_index_dtype(index, "gather");
  check_same_device("gather", {this, &index});
  const int64_t d = wrap_dim(dim_, dim(), "gather");
  check_gather_shapes(*this, d, index, "gather");
  if (dim() == 0) return reshape({1}).gather(0, index.reshape({1})).reshape({});
  check_index_range(index, *this, d, "gather");
  Tensor out = empty(index.sizes(), options());
  kernels::gather(out, *this, d, index);
  record_add_back("GatherBackward", *this, out, d, index, /*scatter=*/true);
  if (trace) trace.record({"gather", {*this, index}, {out}, {d}, {}});
  return out;
}

Tensor Tensor::scatter_add(int64_t dim_, const Tensor& index, const Tensor& src) const {
  check_index_dtype(index, "scatter_add");
  check_same_device("scatter_add", {this, &index, &src});
  LOOM_CHECK(src.dtype() == dtype(), DTypeError, "scatter_add: self (", dtype_name(dtype()),
             ") and src (", dtype_name(src.dtype()), ") must have the same dtype");
  const int64_t d = wrap_dim(dim_, dim(), "scatter_add");
  check_gather_shapes(*this, d, index, "scatter_add");
  LOOM_CHECK(src.dim() == index.dim(), ShapeError, "scatter_add: index ", shape_str(index.sizes()),
             " and src ", shape_str(src.sizes()), " must have the same number of dims");
  for (int64_t i = 0; i < index.dim(); ++i) {
    LOOM_CHECK(index.size(i) <= src.size(i), ShapeError, "scatter_add: index ",
               shape_str(index.sizes()), " is larger than src ", shape_str(src.sizes()), " in dim ", i);
  }
  if (dim() == 0)
    return reshape({1}).scatter_add(0, index.reshape({1}), src.reshape({1})).reshape({});
  check_index_range(index, *this, d, "scatter_add");
  Tensor out = empty(sizes(), options());
  kernels::copy(out, *this);
  kernels::scatter_add(out, d, index, src);
  if (needs_grad(*this, src)) {
    Shape src_shape = src.sizes();
    record("ScatterAddBackward", {*this, src}, {out}, {index}, [d, src_shape](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      const Tensor& index = ctx.saved[0];
      Tensor gsrc;
      if (ctx.needs(1)) {
        gsrc = g.gather(d, index);
        if (gsrc.sizes() != src_shape) {  // src is larger than index: the rest gets zero
          Tensor full = zeros(src_shape, g.options());
          Tensor region = full;
          for (int64_t i = 0; i < index.dim(); ++i) region = region.narrow(i, 0, index.size(i));
          region.copy_(gsrc);
          gsrc = full;
        }
      }
      return std::vector<Tensor>{ctx.needs(0) ? g : Tensor(), gsrc};
    });
  }
  return out;
}

namespace {

Tensor triangle(const Tensor& self, int64_t k, bool lower) {
  const char* op = lower ? "tril" : "triu";
  LOOM_CHECK(self.dim() >= 2, ShapeError, op, ": expects a tensor with at least 2 dims, got shape ",
             shape_str(self.sizes()));
  Tensor out = empty(self.sizes(), self.options());
  kernels::triangle(out, self, k, lower);
  if (needs_grad(self)) {
    record(lower ? "TrilBackward" : "TriuBackward", {self}, {out}, {}, [k, lower](BackwardContext& ctx) {
      return std::vector<Tensor>{triangle(ctx.grad(), k, lower)};
    });
  }
  return out;
}

}  // namespace

Tensor Tensor::tril(int64_t diagonal) const { return triangle(*this, diagonal, true); }
Tensor Tensor::triu(int64_t diagonal) const { return triangle(*this, diagonal, false); }

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  check_index_dtype(indices, "embedding");
  check_same_device("embedding", {&weight, &indices});
  LOOM_CHECK(weight.dim() == 2, ShapeError, "embedding: weight must be 2-D (num_embeddings, dim), got shape ",
             shape_str(weight.sizes()));
  const int64_t rows = weight.size(0), dim = weight.size(1);
  LOOM_CHECK(padding_idx < rows, ValueError, "embedding: padding_idx ", padding_idx,
             " is out of range for weight of shape ", shape_str(weight.sizes()));
  const Tensor flat = indices.reshape({-1});
  check_index_range(flat, weight, 0, "embedding");
  Shape shape = indices.sizes();
  shape.push_back(dim);
  Tensor out = empty(shape, weight.options());  // (..., dim)
  kernels::index_select(out.view({flat.numel(), dim}), weight, 0, flat);
  if (needs_grad(weight)) {
    record("EmbeddingBackward", {weight}, {out}, {flat}, [rows, dim, padding_idx](BackwardContext& ctx) {
      const Tensor& flat = ctx.saved[0];
      Tensor gw = add_into_zeros({rows, dim}, 0, flat, ctx.grad().reshape({flat.numel(), dim}), false);
      if (padding_idx >= 0) gw.select(0, padding_idx).zero_();  // padding rows get no gradient
      return std::vector<Tensor>{gw};
    });
  }
  if (trace) trace.record({"embedding", {weight, indices}, {out}, {}, {}});
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_index_dtype(indices, "one_hot");
  LOOM_CHECK(num_classes >= -1, ValueError, "one_hot: num_classes must be -1 or non-negative, got ",
             num_classes);
  if (num_classes == -1) {
    LOOM_CHECK(indices.numel() > 0, ValueError,
               "one_hot: cannot infer num_classes from an empty tensor of shape ",
               shape_str(indices.sizes()), "; pass num_classes");
    const std::vector<int64_t> values = indices.to_vector<int64_t>();
    num_classes = *std::max_element(values.begin(), values.end()) + 1;
  }
  const Tensor flat = indices.reshape({-1, 1});  // (n, 1)
  kernels::check_indices(flat, num_classes, "one_hot");
  Shape shape = indices.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, TensorOptions(kInt64).device(indices.device()));  // (..., C)
  const Tensor one = ones({1, 1}, out.options()).expand({flat.size(0), 1});
  kernels::scatter_add(out.view({flat.size(0), num_classes}), 1, flat, one);
  return out;
}

}  // namespace loom
