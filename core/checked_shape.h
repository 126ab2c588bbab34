// Overflow-checked shape arithmetic: element counts and strides of user-given shapes.
//
// Note [checked shape arithmetic]
// Element counts, strides and byte sizes are products of user-given numbers, and a product
// that wraps around int64 is a tiny count for an enormous shape (zeros({1 << 40, 1 << 40})
// would hold 0 elements; a count wrapped to 2 allocates 8 bytes that a kernel then writes
// far past). So a shape is checked once where it becomes a tensor's (the factories,
// from_vector, view/reshape, expand and broadcasting, cat, matmul's batch dims): the product
// of its sizes, counting a size-0 dim as 1, must fit in int64, else a ValueError names the
// op and the shape. Counting 0 as 1 makes every partial product of a checked shape, and its
// contiguous strides, fit too, so TensorImpl::numel and the loops over a tensor's dims stay
// plain products. Index arithmetic in the views (start + length, the rounding of a slice's
// length, stride * step) is written so that it cannot overflow.
#pragma once

#include <cstdint>

#include "core/tensor_impl.h"

namespace loom {

// The number of elements of sizes (all >= 0); a ValueError naming op and the shape when the
// product of the sizes, counting 0 as 1, overflows int64.
int64_t check_numel(const Shape& sizes, const char* op);

// contiguous_strides (core/tensor_impl.h) with a ValueError naming op and the shape when a
// stride overflows int64.
Shape contiguous_strides(const Shape& sizes, const char* op);

}  // namespace loom
