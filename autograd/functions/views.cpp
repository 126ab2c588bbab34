// Views (share storage, record a backward that routes the gradient back into the
// input's shape), and the ops that copy: contiguous, clone, to, copy_.
#include <algorithm>
#include <optional>

#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/checked_shape.h"
#include "core/factories.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {

Tensor broadcast_to_shape(const Tensor& t, const Shape& shape, const char* op) {
  if (t.sizes() == shape) return t;
  const int64_t lead = int64_t(shape.size()) - t.dim();
  LOOM_CHECK(lead >= 0, ShapeError, op, ": cannot broadcast shape ", shape_str(t.sizes()), " to ",
             shape_str(shape));
  for (int64_t s : shape)
    LOOM_CHECK(s >= 0, ShapeError, op, ": cannot broadcast shape ", shape_str(t.sizes()), " to ",
               shape_str(shape), ": negative size ", s);
  check_numel(shape, op);  // a new leading dim or a dim of size 1 grows the count
  Shape strides(shape.size(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t s = t.size(d), target = shape[size_t(d + lead)];
    LOOM_CHECK(s == target || s == 1, ShapeError, op, ": cannot broadcast shape ",
               shape_str(t.sizes()), " to ", shape_str(shape));
    strides[size_t(d + lead)] = s == 1 && target != 1 ? 0 : t.stride(d);
  }
  return alias_with(t, shape, strides, t.storage_offset());
}

namespace {

// Records a view's backward: grad_in = fn(grad_out).
void record_view(const char* name, const Tensor& in, const Tensor& out,
                 std::function<Tensor(const Tensor&)> fn) {
  if (!needs_grad(in)) return;
  record(name, {in}, {out}, {}, [fn = std::move(fn)](BackwardContext& ctx) {
    return std::vector<Tensor>{fn(ctx.grad())};
  });
}

// Strides for viewing (sizes, strides) as new_sizes without a copy, if possible
// (PyTorch's computeStride): each run of merged old dims must be contiguous in itself.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  Shape out(new_sizes.size());
  if (numel == 0 || sizes.empty()) return contiguous_strides(new_sizes);
  int64_t view_d = int64_t(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[size_t(d)];  // a partial product of a checked shape: no overflow
    int64_t chunk_stride = 0;  // what strides[d - 1] must be to merge dims d - 1 and d
    const bool overflow = __builtin_mul_overflow(tensor_numel, chunk_base_stride, &chunk_stride);
    if (d == 0 || (sizes[size_t(d - 1)] != 1 && (overflow || strides[size_t(d - 1)] != chunk_stride))) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[size_t(view_d)] == 1)) {
        if (__builtin_mul_overflow(view_numel, chunk_base_stride, &out[size_t(view_d)])) return std::nullopt;
        view_numel *= new_sizes[size_t(view_d)];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      LOOM_CHECK(infer < 0, ShapeError, op, ": only one dimension can be -1, got ", shape_str(shape));
      infer = int64_t(i);
      out[i] = 1;  // for the product of the given sizes
    } else {
      LOOM_CHECK(out[i] >= 0, ShapeError, op, ": invalid size in shape ", shape_str(shape));
    }
  }
  const int64_t known = check_numel(out, op);  // ValueError if the sizes overflow int64
  if (infer >= 0) {
    LOOM_CHECK(known != 0 && numel % known == 0, ShapeError, op, ": shape ", shape_str(shape),
               " is invalid for input of shape ", shape_str(from), " (", numel, " elements)");
    out[size_t(infer)] = numel / known;
  }
  LOOM_CHECK(infer >= 0 || known == numel, ShapeError, op, ": shape ", shape_str(shape),
             " is invalid for input of shape ", shape_str(from), " (", numel, " elements)");
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  Shape new_sizes = infer_shape(shape, numel(), "view", sizes());
  auto strides = view_strides(sizes(), this->strides(), new_sizes);
  LOOM_CHECK(strides.has_value(), ShapeError, "view: cannot view a tensor of shape ",
             shape_str(sizes()), " with strides ", shape_str(this->strides()), " as ",
             shape_str(new_sizes), " without a copy; use reshape()");
  Tensor out = alias_with(*this, new_sizes, *strides, storage_offset());
  Shape in_shape = sizes();
  record_view("ViewBackward", *this, out, [in_shape](const Tensor& g) { return g.reshape(in_shape); });
  if (trace) trace.record({"reshape", {*this}, {out}, shape, {}});  // ints: the sizes asked for
  return out;
}

Tensor Tensor::reshape(const Shape& shape) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  Shape new_sizes = infer_shape(shape, numel(), "reshape", sizes());
  Tensor out = view_strides(sizes(), strides(), new_sizes) ? view(new_sizes) : contiguous().view(new_sizes);
  if (trace) trace.record({"reshape", {*this}, {out}, shape, {}});
  return out;
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const int64_t d0 = wrap_dim(dim0, dim(), "transpose"), d1 = wrap_dim(dim1, dim(), "transpose");
  if (dim() == 0) return alias_with(*this, sizes(), strides(), storage_offset());
  Shape sz = sizes(), st = strides();
  std::swap(sz[size_t(d0)], sz[size_t(d1)]);
  std::swap(st[size_t(d0)], st[size_t(d1)]);
  Tensor out = alias_with(*this, sz, st, storage_offset());
  record_view("TransposeBackward", *this, out, [d0, d1](const Tensor& g) { return g.transpose(d0, d1); });
  if (trace) trace.record({"transpose", {*this}, {out}, {d0, d1}, {}});
  return out;
}

Tensor Tensor::t() const {
  LOOM_CHECK(dim() <= 2, ShapeError, "t: expects a tensor with <= 2 dims, got shape ", shape_str(sizes()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Dims& dims) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  LOOM_CHECK(int64_t(dims.size()) == dim(), ShapeError, "permute: got ", dims.size(),
             " dims for a tensor of shape ", shape_str(sizes()));
  Shape sz(dims.size()), st(dims.size());
  Dims inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    LOOM_CHECK(!seen[size_t(d)], ShapeError, "permute: dim ", d, " repeats in ", shape_str(dims));
    seen[size_t(d)] = true;
    sz[i] = size(d);
    st[i] = stride(d);
    inverse[size_t(d)] = int64_t(i);
  }
  Tensor out = alias_with(*this, sz, st, storage_offset());
  record_view("PermuteBackward", *this, out, [inverse](const Tensor& g) { return g.permute(inverse); });
  if (trace) {  // ints: the dims wrapped
    Dims perm(dims.size());
    for (size_t d = 0; d < perm.size(); ++d) perm[size_t(inverse[d])] = int64_t(d);
    trace.record({"permute", {*this}, {out}, perm, {}});
  }
  return out;
}

Tensor Tensor::slice(int64_t dim_, std::optional<int64_t> start_, std::optional<int64_t> end_,
                     int64_t step) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const int64_t d = wrap_dim(dim_, dim(), "slice");
  LOOM_CHECK(dim() > 0, ShapeError, "slice: cannot slice a 0-dim tensor");
  LOOM_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step);
  const int64_t n = size(d);
  int64_t start = start_.value_or(0), end = end_.value_or(n);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes(), st = strides();
  // ceil((end - start) / step), written so a huge step cannot overflow (x[0:4:2**63-1] has
  // one element). A dim of one element keeps its stride: step * stride may overflow, and
  // no element is ever reached through it.
  sz[size_t(d)] = end == start ? 0 : (end - start - 1) / step + 1;
  if (sz[size_t(d)] > 1) st[size_t(d)] *= step;  // the last element is in bounds: no overflow
  Tensor out = alias_with(*this, sz, st, storage_offset() + start * stride(d));
  Shape in_shape = sizes();
  DType dt = dtype();
  Device dev = device();
  record_view("SliceBackward", *this, out, [=](const Tensor& g) {
    Tensor gi = zeros(in_shape, TensorOptions(dt).device(dev));
    gi.slice(d, start, end, step).copy_(g);
    return gi;
  });
  if (trace) trace.record({"slice", {*this}, {out}, {d, start, end, step, n}, {}});
  return out;
}

Tensor Tensor::narrow(int64_t dim_, int64_t start, int64_t length) const {
  const int64_t d = wrap_dim(dim_, dim(), "narrow");
  LOOM_CHECK(dim() > 0, ShapeError, "narrow: cannot narrow a 0-dim tensor");
  const int64_t n = size(d);
  LOOM_CHECK(start >= -n && start <= n, IndexError, "narrow: start ", start, " is out of range for dim ",
             d, " of size ", n, " (shape ", shape_str(sizes()), ")");
  if (start < 0) start += n;
  int64_t end = 0;
  const bool wraps = __builtin_add_overflow(start, length, &end);  // narrow(0, 1, INT64_MAX)
  LOOM_CHECK(length >= 0 && !wraps && end <= n, IndexError, "narrow: range [", start, ", ",
             wraps ? std::string("past int64") : std::to_string(end), ") of length ", length,
             " is out of bounds for dim ", d, " of size ", n, " (shape ", shape_str(sizes()), ")");
  return slice(d, start, end);
}

Tensor Tensor::select(int64_t dim_, int64_t index) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  LOOM_CHECK(dim() > 0, IndexError, "select: cannot index a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "select");
  const int64_t n = size(d);
  LOOM_CHECK(index >= -n && index < n, IndexError, "select: index ", index,
             " is out of range for dim ", d, " of size ", n, " (shape ", shape_str(sizes()), ")");
  if (index < 0) index += n;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = alias_with(*this, sz, st, storage_offset() + index * stride(d));
  Shape in_shape = sizes();
  DType dt = dtype();
  Device dev = device();
  record_view("SelectBackward", *this, out, [=](const Tensor& g) {
    Tensor gi = zeros(in_shape, TensorOptions(dt).device(dev));
    gi.select(d, index).copy_(g);
    return gi;
  });
  if (trace) trace.record({"select", {*this}, {out}, {d, index, n}, {}});  // ints: dim, index, the dim's size
  return out;
}

Tensor Tensor::squeeze() const {
  Shape sz;
  for (int64_t s : sizes())
    if (s != 1) sz.push_back(s);
  return sz.size() == sizes().size() ? *this : reshape(sz);
}

Tensor Tensor::squeeze(int64_t dim_) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const int64_t d = wrap_dim(dim_, dim(), "squeeze");
  if (dim() == 0 || size(d) != 1) return *this;
  Shape sz = sizes();
  sz.erase(sz.begin() + d);
  Tensor out = view(sz);
  if (trace) trace.record({"squeeze", {*this}, {out}, {d}, {}});
  return out;
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const int64_t d = wrap_dim(dim_, dim() + 1, "unsqueeze");
  Shape sz = sizes(), st = strides();
  int64_t new_stride = 1;
  LOOM_CHECK(d == dim() || !__builtin_mul_overflow(sz[size_t(d)], st[size_t(d)], &new_stride), ValueError,
             "unsqueeze: the stride for dim ", d, " of a tensor of shape ", shape_str(sz), " and strides ",
             shape_str(st), " overflows int64");
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  Tensor out = alias_with(*this, sz, st, storage_offset());
  record_view("UnsqueezeBackward", *this, out, [d](const Tensor& g) { return g.squeeze(d); });
  if (trace) trace.record({"unsqueeze", {*this}, {out}, {d}, {}});
  return out;
}

Tensor Tensor::expand(const Shape& shape) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  LOOM_CHECK(int64_t(shape.size()) >= dim(), ShapeError, "expand: the target shape ",
             shape_str(shape), " has fewer dims than the tensor's shape ", shape_str(sizes()));
  Shape target = shape;
  const int64_t lead = int64_t(shape.size()) - dim();
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (shape[size_t(d)] == -1) {
      LOOM_CHECK(d >= lead, ShapeError, "expand: -1 is not allowed in a new leading dim, shape ",
                 shape_str(shape));
      target[size_t(d)] = size(d - lead);
    }
  }
  Tensor out = broadcast_to_shape(*this, target, "expand");
  if (out.is_same(*this)) return *this;
  Shape in_shape = sizes();
  record_view("ExpandBackward", *this, out, [in_shape](const Tensor& g) { return sum_to(g, in_shape); });
  if (trace) trace.record({"expand", {*this}, {out}, target, {}});
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  LOOM_CHECK(s <= e, ValueError, "flatten: start_dim ", s, " is after end_dim ", e);
  Shape sz(sizes().begin(), sizes().begin() + s);
  int64_t prod = 1;
  for (int64_t d = s; d <= e; ++d) prod *= size(d);
  sz.push_back(prod);
  sz.insert(sz.end(), sizes().begin() + e + 1, sizes().end());
  Tensor out = reshape(sz);
  if (trace) trace.record({"flatten", {*this}, {out}, {s, e}, {}});
  return out;
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim_) const {
  const int64_t d = wrap_dim(dim_, dim(), "split");
  LOOM_CHECK(split_size > 0, ValueError, "split: split_size must be positive, got ", split_size);
  std::vector<Tensor> parts;
  const int64_t n = size(d);
  for (int64_t start = 0; start < n || (n == 0 && parts.empty()); start += split_size)
    parts.push_back(narrow(d, start, std::min(split_size, n - start)));
  return parts;
}

std::vector<Tensor> Tensor::split(const Dims& split_sizes, int64_t dim_) const {
  const int64_t d = wrap_dim(dim_, dim(), "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    LOOM_CHECK(s >= 0 && !__builtin_add_overflow(total, s, &total), ValueError, "split: sizes ",
               shape_str(split_sizes), " must be non-negative and sum to dim ", d, " of shape ",
               shape_str(sizes()));
  }
  LOOM_CHECK(total == size(d), ShapeError, "split: sizes ", shape_str(split_sizes), " sum to ", total,
             " but dim ", d, " of shape ", shape_str(sizes()), " has size ", size(d));
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    parts.push_back(narrow(d, start, s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim_) const {
  LOOM_CHECK(chunks > 0, ValueError, "chunk: chunks must be positive, got ", chunks);
  const int64_t n = size(wrap_dim(dim_, dim(), "chunk"));
  return split(n == 0 ? 1 : (n - 1) / chunks + 1, dim_);  // ceil(n / chunks) without overflow
}

std::vector<Tensor> Tensor::unbind(int64_t dim_) const {
  const int64_t d = wrap_dim(dim_, dim(), "unbind");
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < size(d); ++i) parts.push_back(select(d, i));
  return parts;
}

// ---- copies ---------------------------------------------------------------------------

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  Tensor out = empty(sizes(), options());
  kernels::copy(out, *this);
  if (needs_grad(*this))
    record("CloneBackward", {*this}, {out}, {}, [](BackwardContext& ctx) { return std::vector<Tensor>{ctx.grad()}; });
  if (trace) trace.record({"identity", {*this}, {out}, {}, {}});
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  Tensor out = empty(sizes(), options().dtype(dtype));
  kernels::copy(out, *this);
  if (needs_grad(*this) && loom::is_floating_point(dtype)) {
    DType in_dtype = this->dtype();
    record("ToCopyBackward", {*this}, {out}, {}, [in_dtype](BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad().to(in_dtype)};
    });
  }
  if (trace) trace.record({"cast", {*this}, {out}, {int64_t(dtype)}, {}});
  return out;
}

Tensor Tensor::to(Device device, bool non_blocking) const {
  if (device == this->device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(sizes(), options().device(device));
  kernels::copy_across_devices(out, src, non_blocking);
  if (needs_grad(*this)) {
    Device in_device = this->device();
    record("ToCopyBackward", {*this}, {out}, {}, [in_device](BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad().to(in_device)};
    });
  }
  return out;
}

Tensor Tensor::to(Device device, DType dtype) const { return to(device).to(dtype); }

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  check_inplace(*this, "copy_");
  Tensor s = src;
  if (s.device() != device()) s = s.detach().to(device(), non_blocking);
  Tensor expanded = broadcast_to_shape(s, sizes(), "copy_");
  if (needs_grad(*this, src)) {  // may throw: before the write
    Shape src_shape = src.sizes();
    DType src_dtype = src.dtype();
    Device src_device = src.device();
    auto node = record("CopyBackwards", {*this, src}, {}, {}, [=](BackwardContext& ctx) {
      Tensor g = ctx.grad();
      Tensor gs;
      if (ctx.needs(1)) gs = sum_to(g, src_shape).to(src_device).to(src_dtype);
      return std::vector<Tensor>{zeros_like(g), gs};
    });
    rebase_history(*this, node, "copy_");
  }
  kernels::copy(*this, expanded);
  bump_version();
  return *this;
}

}  // namespace loom
