// How the CUDA reductions, softmax, cumsum and layer norm read a strided tensor in place:
// as a 3-D view (outer, len, inner) with one stride each, the reduced (or scanned) dims
// merged into `len`. Plain C++ (no CUDA), so the host tests check it.
//
// Note [reading reductions in place]
// Element (o, r, i) of the view is at o * outer_stride + r * len_stride + i * inner_stride
// (in elements from the tensor's first element). The kept dims, in order, split into a
// prefix merged into `outer` and a suffix merged into `inner`, so output (o, i) is element
// o * inner + i of a contiguous output of the kept dims. Dims merge when each one's stride
// is the next one's stride times its size (size-1 dims drop out), which holds for any
// contiguous block of dims of a contiguous tensor and for most views (a slice of rows, a
// transpose read along its own dims).
//   (B, N) contiguous, sum over dim 1:  outer B, len N (stride 1), inner 1: a row each.
//   (B, N) contiguous, sum over dim 0:  outer 1, len B (stride N), inner N (stride 1): a
//                                        bias gradient, read column-wise, coalesced.
//   (A, B, C) over dim 1:                outer A, len B (stride C), inner C.
// Of the splits that merge, the one whose fastest index (len for inner == 1, inner
// otherwise) has the smallest stride is used; a layout no split describes (dims {0, 2} of
// a contiguous (A, B, C)) has none, and the caller copies the tensor first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "core/half.h"  // LOOM_HOST_DEVICE
#include "core/tensor.h"

namespace loom::kernels::cuda {

struct ReduceGeometry {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t outer_stride = 0, len_stride = 0, inner_stride = 0;  // in elements

  // Where column c = o * inner + i (its element r = 0) is.
  LOOM_HOST_DEVICE int64_t column_start(int64_t c) const {
    return (c / inner) * outer_stride + (c % inner) * inner_stride;
  }
};

struct MergedDims {
  int64_t size = 1, stride = 0;
};

// dims (outermost first) as one dim, or nullopt when their strides do not chain.
inline std::optional<MergedDims> merge_dims(const Shape& sizes, const Shape& strides,
                                            const std::vector<int64_t>& dims) {
  MergedDims m;
  bool any = false;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {  // innermost first
    const int64_t size = sizes[size_t(*it)], stride = strides[size_t(*it)];
    if (size == 1) continue;
    if (size == 0) return MergedDims{0, 0};
    if (!any) {
      m = {size, stride};
      any = true;
    } else {
      if (stride != m.stride * m.size) return std::nullopt;
      m.size *= size;
    }
  }
  return m;
}

// The view of a tensor of `sizes`, `strides` with `reduced` (ascending) merged into len
// (Note [reading reductions in place]); nullopt when no split of the kept dims merges.
inline std::optional<ReduceGeometry> reduce_geometry(const Shape& sizes, const Shape& strides,
                                                     const std::vector<int64_t>& reduced) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d)
    if (!std::binary_search(reduced.begin(), reduced.end(), d)) kept.push_back(d);
  std::optional<MergedDims> len = merge_dims(sizes, strides, reduced);
  if (!len) {  // the reduced dims may chain in another order (a transposed input)
    std::vector<int64_t> by_stride = reduced;
    std::stable_sort(by_stride.begin(), by_stride.end(),
                     [&](int64_t a, int64_t b) { return strides[size_t(a)] > strides[size_t(b)]; });
    len = merge_dims(sizes, strides, by_stride);
  }
  if (!len) return std::nullopt;
  std::optional<ReduceGeometry> best;
  int64_t best_fast_stride = 0;
  for (size_t k = 0; k <= kept.size(); ++k) {
    const std::optional<MergedDims> outer =
        merge_dims(sizes, strides, std::vector<int64_t>(kept.begin(), kept.begin() + int64_t(k)));
    const std::optional<MergedDims> inner =
        merge_dims(sizes, strides, std::vector<int64_t>(kept.begin() + int64_t(k), kept.end()));
    if (!outer || !inner) continue;
    const ReduceGeometry g{outer->size, len->size, inner->size, outer->stride, len->stride, inner->stride};
    const int64_t fast = g.inner == 1 ? std::abs(g.len_stride) : std::abs(g.inner_stride);
    if (!best || fast < best_fast_stride) best = g, best_fast_stride = fast;
  }
  return best;
}

// The view along one dim with the kept dims split around it (dims before it outer, after
// it inner), as softmax and cumsum walk a tensor; nullopt when either side does not merge.
inline std::optional<ReduceGeometry> dim_geometry(const Shape& sizes, const Shape& strides, int64_t dim) {
  std::vector<int64_t> before, after;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d)
    if (d != dim) (d < dim ? before : after).push_back(d);
  const std::optional<MergedDims> outer = merge_dims(sizes, strides, before);
  const std::optional<MergedDims> inner = merge_dims(sizes, strides, after);
  if (!outer || !inner) return std::nullopt;
  return ReduceGeometry{outer->size, sizes[size_t(dim)], inner->size,
                        outer->stride, strides[size_t(dim)], inner->stride};
}

inline std::optional<ReduceGeometry> dim_geometry(const Tensor& t, int64_t dim) {
  return dim_geometry(t.sizes(), t.strides(), dim);
}

// Whether p can be read and written 16 bytes at a time (the kernels' vector loads).
inline bool is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// How a column reduction (each block folding a tile of adjacent columns down its rows)
// splits its `len` steps into chunks while its `tiles` blocks cannot fill `max_blocks`:
// each of a block's `block_rows` rows of threads keeps at least 16 steps, no chunk is
// empty, and chunk c covers [c * len, (c + 1) * len). With more than one chunk the caller
// launches twice — each chunk's partials, then each column's chunks added in order — and the
// split depends only on the shapes and the device, so results repeat run to run.
struct ColumnChunks {
  int64_t count = 1, len = 1;
};

inline ColumnChunks column_chunks(int64_t len, int64_t tiles, int64_t max_blocks, int64_t block_rows) {
  const int64_t wanted = std::clamp<int64_t>(max_blocks / std::max<int64_t>(tiles, 1), 1,
                                             std::max<int64_t>((len + block_rows * 16 - 1) / (block_rows * 16), 1));
  const int64_t chunk_len = std::max<int64_t>((len + wanted - 1) / wanted, 1);
  return {std::max<int64_t>((len + chunk_len - 1) / chunk_len, 1), chunk_len};
}

// A contiguous (rows, n) matrix's rows as reduction geometry.
inline ReduceGeometry contiguous_rows(int64_t rows, int64_t n) { return {rows, n, 1, n, 1, 1}; }

// Whether the row kernels' 16-byte loads and stores of T apply to every (pointer, geometry):
// each row starts 16-byte aligned (the first does, and every row's start is a whole number
// of vectors from it), its elements adjacent and a whole number of vectors.
template <typename T>
bool rows_vectorize(std::initializer_list<std::pair<const void*, ReduceGeometry>> operands) {
  constexpr int VEC = int(16 / sizeof(T));
  for (const auto& [p, g] : operands)
    if (!(is_aligned16(p) && g.len_stride == 1 && g.len % VEC == 0 && (g.outer <= 1 || g.outer_stride % VEC == 0)))
      return false;
  return true;
}

}  // namespace loom::kernels::cuda
