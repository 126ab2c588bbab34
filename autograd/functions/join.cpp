// Joining tensors: cat (copies each input into its slice of the output; the backward
// narrows the gradient back into pieces) and stack (unsqueeze + cat).
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {

namespace {

// PyTorch's legacy rule: a 1-D empty tensor may be concatenated with anything (it is
// skipped unless the others are 1-D too).
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim_) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  LOOM_CHECK(!tensors.empty(), ValueError, "cat: expected a non-empty list of tensors");
  // The shape every input must match outside `dim`: the first that is not skipped.
  size_t ref = 0;
  while (ref + 1 < tensors.size() && is_legacy_empty(tensors[ref])) ++ref;
  const Tensor& first = tensors[ref];
  LOOM_CHECK(first.dim() > 0, ShapeError, "cat: tensor ", ref,
             " is 0-dim (shape ()) and cannot be concatenated; unsqueeze it or use stack");
  const int64_t d = wrap_dim(dim_, first.dim(), "cat");
  auto skip = [&](const Tensor& t) { return first.dim() != 1 && is_legacy_empty(t); };
  Shape shape = first.sizes();
  shape[size_t(d)] = 0;
  DType dtype = first.dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    check_same_device("cat", {&first, &t});
    dtype = promote_types(dtype, t.dtype());  // skipped tensors count too, as in PyTorch
    if (skip(t)) continue;
    LOOM_CHECK(t.dim() == first.dim(), ShapeError, "cat: tensor ", i, " has shape ",
               shape_str(t.sizes()), " but tensor ", ref, " has shape ", shape_str(first.sizes()),
               " (all tensors need the same number of dims)");
    for (int64_t k = 0; k < t.dim(); ++k) {
      LOOM_CHECK(k == d || t.size(k) == first.size(k), ShapeError, "cat: sizes must match except in dim ",
                 d, ", but tensor ", ref, " has shape ", shape_str(first.sizes()), " and tensor ", i,
                 " has shape ", shape_str(t.sizes()), " (they differ in dim ", k, ")");
    }
    LOOM_CHECK(!__builtin_add_overflow(shape[size_t(d)], t.size(d), &shape[size_t(d)]), ValueError,
               "cat: the sizes in dim ", d, " sum past int64 at tensor ", i, " of shape ", shape_str(t.sizes()));
  }

  Tensor out = empty(shape, TensorOptions(dtype).device(first.device()));
  std::vector<int64_t> offsets;  // where each input starts along d; -1 when skipped
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skip(t)) {
      offsets.push_back(-1);
      continue;
    }
    offsets.push_back(offset);
    if (t.size(d) > 0) kernels::copy(out.narrow(d, offset, t.size(d)), t);
    offset += t.size(d);
  }

  if (needs_grad_list(tensors)) {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const Tensor& t : tensors) {
      shapes.push_back(t.sizes());
      dtypes.push_back(t.dtype());
    }
    record("CatBackward", tensors, {out}, {}, [=](BackwardContext& ctx) {
      const Tensor& g = ctx.grad();
      std::vector<Tensor> grads(shapes.size());
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (!ctx.needs(i)) continue;
        grads[i] = offsets[i] < 0 ? zeros(shapes[i], g.options().dtype(dtypes[i]))
                                  : g.narrow(d, offsets[i], shapes[i][size_t(d)]).to(dtypes[i]);
      }
      return grads;
    });
  }
  if (trace) trace.record({"cat", tensors, {out}, {d}, {}});
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  LOOM_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of tensors");
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    LOOM_CHECK(tensors[i].sizes() == tensors[0].sizes(), ShapeError,
               "stack: expects tensors of equal shape, but tensor 0 has shape ",
               shape_str(tensors[0].sizes()), " and tensor ", i, " has shape ",
               shape_str(tensors[i].sizes()));
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace loom
