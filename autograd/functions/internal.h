// Helpers shared by the op implementations in autograd/functions/ (not user API).
#pragma once

#include "core/tensor.h"

namespace loom {

// t viewed with `shape` by broadcasting (stride 0 on expanded dims); no history.
// Throws ShapeError naming `op` if t cannot broadcast to shape.
Tensor broadcast_to_shape(const Tensor& t, const Shape& shape, const char* op);
// Throws DeviceError naming `op` unless all defined tensors share a device.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
// dim wrapped into [0, t.dim()) (a 0-dim tensor takes 0 and -1, as one of size 1); the
// IndexError names the op and the shape.
int64_t checked_dim(const Tensor& t, int64_t dim, const char* op);
// The tensor's dims as a sorted, wrapped, de-duplicated list; empty `dims` means all.
Dims reduction_dims(const Tensor& t, const Dims& dims, const char* op);
// The shape t has after reducing `dims` (sorted, wrapped).
Shape reduced_shape(const Shape& shape, const Dims& dims, bool keepdim);
// t.detach(), or t itself when undefined (optional inputs such as a missing bias).
inline Tensor detached(const Tensor& t) { return t.defined() ? t.detach() : t; }
// Product of all sizes but the last (the rows of t viewed as a matrix; 1 for a 1-D t).
int64_t leading_numel(const Tensor& t);
// Undoes keepdim=false: re-inserts size-1 dims at `dims` so g broadcasts against the input.
Tensor unsqueeze_dims(const Tensor& g, const Dims& dims, bool keepdim);

}  // namespace loom
