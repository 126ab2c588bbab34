// Where the rows of a fused attention operand are: shared by the CPU kernel
// (kernels/cpu/attention.cpp) and the CUDA one (kernels/cuda/attention.cu).
//
// Note [attention head layouts]
// q, k, v, out, grad_out, dq, dk and dv may each be a (B, H, rows, cols) view with any
// strides but a unit column stride (N = B·H matrices, n = b·H + h), besides a contiguous
// (N, rows, cols) tensor: MultiheadAttention's heads are such views of its projections'
// (B, rows, H·cols) outputs, and its output heads are wanted in that layout too, so nothing
// is copied to make the heads contiguous and back (four copies of each projection per
// layer, forward and backward), on either device. A RowLayout turns (n, row) into an
// offset; every tile reads its operand rows in place with their row stride as ld. The bias
// is read the same way, a (B, H, L, S) or (N, L, S) view whose broadcast dims have stride
// 0 (a key-padding mask is one row of S per batch entry), plus its column stride.
#pragma once

#include <cstdint>

#include "core/half.h"
#include "core/tensor.h"

namespace loom::kernels {

// Where row i of matrix n of an operand starts, in elements from its data pointer.
struct RowLayout {
  int64_t heads = 1, batch_stride = 0, head_stride = 0, row_stride = 0;
  LOOM_HOST_DEVICE int64_t at(int64_t n, int64_t i) const {
    return (n / heads) * batch_stride + (n % heads) * head_stride + i * row_stride;
  }
};

// The layout of a (N, rows, cols) or (B, H, rows, cols) operand.
inline RowLayout row_layout(const Tensor& t) {
  if (t.dim() == 3) return {1, t.stride(0), 0, t.stride(1)};
  return {t.size(1), t.stride(0), t.stride(1), t.stride(2)};
}

// N: the matrices of a (N, rows, cols) or (B, H, rows, cols) operand.
inline int64_t attention_matrices(const Tensor& t) { return t.dim() == 3 ? t.size(0) : t.size(0) * t.size(1); }

}  // namespace loom::kernels
