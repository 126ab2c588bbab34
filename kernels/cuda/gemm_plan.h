// How kernels::bmm on row-major strided tensors becomes one column-major strided-batched
// cuBLAS GEMM (kernels/cuda/blas.cpp). Plain C++, so the host tests check the mapping by
// running the planned GEMM as loops.
//
// Note [row-major tensors in cuBLAS]
// cuBLAS is column-major. A matrix whose columns have unit stride (row-major) is, read
// column-major, its own transpose with leading dimension = the row stride; one whose rows
// have unit stride is itself with leading dimension = the column stride. So the output is
// computed as whichever of C or C^T its memory holds (C^T = B^T A^T), and each operand is
// passed untransposed when its memory holds the orientation needed, transposed otherwise.
// Only operands with neither dim of unit stride (or overlapping rows) need a copy first.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace loom::kernels::cuda {

// The last two dims of a (B, rows, cols) tensor as a column-major buffer: of the matrix's
// transpose (`transposed`, unit column stride) or of the matrix, with leading dimension ld.
struct ColumnMajor {
  bool transposed;
  int64_t ld;
};

// None when neither dim has unit stride or rows (columns) overlap.
inline std::optional<ColumnMajor> column_major(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2), rs = t.stride(1), cs = t.stride(2);
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) return ColumnMajor{true, rows == 1 ? cols : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) return ColumnMajor{false, cols == 1 ? rows : cs};
  return std::nullopt;
}

// An output cuBLAS can write in place: column-major, and batch items that do not overlap.
inline std::optional<ColumnMajor> writable_column_major(const Tensor& out) {
  std::optional<ColumnMajor> c = column_major(out);
  if (!c || out.size(0) == 1) return c;
  const int64_t stored_rows = c->transposed ? out.size(2) : out.size(1);
  const int64_t stored_cols = c->transposed ? out.size(1) : out.size(2);
  if (out.stride(0) < c->ld * (stored_cols - 1) + stored_rows) return std::nullopt;
  return c;
}

// One column-major GEMM per batch item: C (m x n, ldc) = op(first) (m x k) @ op(second)
// (k x n), op transposing when asked; item i of each operand starts stride * i elements
// further (stride 0 for a batch of one).
struct GemmOperand {
  const Tensor* tensor;
  bool transpose;
  int64_t ld, batch_stride;
};
struct GemmPlan {
  int64_t m, n, k, batch;
  GemmOperand first, second;
  int64_t ldc, batch_stride_c;
};

// out (B, M, N) = a (B, M, K) @ b (B, K, N), all three column-major as given.
inline GemmPlan plan_gemm(const Tensor& out, ColumnMajor c, const Tensor& a, ColumnMajor ca, const Tensor& b,
                          ColumnMajor cb) {
  const int64_t batch = out.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  auto batch_stride = [&](const Tensor& t) { return batch == 1 ? 0 : t.stride(0); };
  // The buffer holds C^T = B^T A^T (c.transposed) or C = A B; an operand's buffer is the
  // needed orientation exactly when it is transposed like the output's.
  auto operand = [&](const Tensor& t, ColumnMajor ct) {
    return GemmOperand{&t, ct.transposed != c.transposed, ct.ld, batch_stride(t)};
  };
  GemmPlan plan;
  plan.m = c.transposed ? N : M;
  plan.n = c.transposed ? M : N;
  plan.k = K;
  plan.batch = batch;
  plan.first = c.transposed ? operand(b, cb) : operand(a, ca);
  plan.second = c.transposed ? operand(a, ca) : operand(b, cb);
  plan.ldc = c.ld;
  plan.batch_stride_c = batch_stride(out);
  return plan;
}

}  // namespace loom::kernels::cuda
