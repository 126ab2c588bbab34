// TensorImpl: what a Tensor handle points to.
//
// Note [tensor anatomy]
// A tensor is a strided window onto a Storage: element (i0, i1, ...) lives at
// storage.data + (offset + i0*stride0 + i1*stride1 + ...) * element_size. Views
// (transpose, slice, expand, ...) make a new TensorImpl over the same Storage with other
// sizes/strides/offset, and share the version counter, so an in-place write through any
// view is seen by every tensor that autograd saved from the same memory.
// Autograd metadata (requires_grad, grad, grad_fn) is allocated only when needed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/storage.h"

namespace loom {

using Shape = std::vector<int64_t>;

struct AutogradMeta;  // autograd/autograd_meta.h

struct VersionCounter {
  std::atomic<uint64_t> value{0};
};

struct TensorImpl {
  Storage storage;
  Shape sizes;
  Shape strides;         // in elements
  int64_t offset = 0;    // in elements
  DType dtype = DType::Float32;
  Device device = kCPU;
  std::shared_ptr<VersionCounter> version;  // shared by all views of one storage
  std::shared_ptr<AutogradMeta> autograd;  // null until requires_grad or a grad_fn is set
  bool is_view = false;                    // shares memory with another tensor

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

// Row-major strides for a shape.
Shape contiguous_strides(const Shape& sizes);

}  // namespace loom
