// CPU indexing kernels: index_select, index_add, gather, scatter_add, triangle (tril/triu)
// and the range checks of indices and class targets (thrown at once, with the messages
// every device shares: kernels/support/device_check.h).
//
// Note [indexed loops]
// gather, scatter_add and the general paths of index_select and index_add share one loop.
// The iteration space is the index's shape (index_select and index_add broadcast their 1-D
// index over the other dims with stride 0). It is split into the indexed dim, walked by j
// in order, and the other dims ("positions"), visited by for_each_run and split across
// threads. Two j's of one position may hit the same output element of scatter_add or
// index_add, but two positions never do; so each output element is summed by one thread,
// in j order, and the result does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "kernels/cpu/backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/support/device_check.h"
#include "kernels/support/dispatch_by_size.h"

namespace loom::kernels::cpu {
namespace {

// *d = *s (Scatter false), or *d += *s in opmath (Scatter true).
template <bool Scatter, typename T>
inline void apply(T* d, const T* s) {
  if constexpr (Scatter) *d = T(opmath_t<T>(*d) + opmath_t<T>(*s));
  else *d = *s;
}

// A separate function so the contiguous run vectorises (d and s never overlap).
template <bool Scatter, typename T>
void apply_run(T* __restrict d, const T* __restrict s, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) apply<Scatter>(d + i, s + i);
}

// Note [indexed loops]. Scatter false: dst[p, j] = src[p, index[p, j]] (gather);
// Scatter true: dst[p, index[p, j]] += src[p, j] (scatter_add). `shape` is the iteration
// space (the index's); dst (gather) or src (scatter) has at least its sizes, the other
// tensor at least its sizes outside `dim`.
template <bool Scatter, typename T, typename I>
void indexed_loop(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t dim,
                  const Shape& shape) {
  Shape positions = shape;
  positions[size_t(dim)] = 1;
  auto restride = [&](const Tensor& t) {
    return alias_with(t, positions, t.strides(), t.storage_offset());
  };
  const Tensor d = restride(dst), s = restride(src), x = restride(index);
  const int64_t n = shape[size_t(dim)];
  const int64_t es = int64_t(sizeof(T));
  const int64_t d_step = dst.stride(dim) * es, s_step = src.stride(dim) * es;
  const int64_t x_step = index.stride(dim) * int64_t(sizeof(I));
  // Byte offset of index value k in the indexed tensor; j steps through the other one.
  const int64_t k_step = Scatter ? d_step : s_step;
  const int64_t j_d = Scatter ? 0 : d_step, j_s = Scatter ? s_step : 0;

  for_each_run<3>(positions, {&d, &s, &x}, [&](const std::array<char*, 3>& p,
                                               const std::array<int64_t, 3>& st, int64_t m) {
    // Element (i, j) of the run: an index per element (gather, scatter_add).
    auto element = [&](int64_t i, int64_t j) {
      const int64_t k = int64_t(*reinterpret_cast<const I*>(p[2] + i * st[2] + j * x_step)) * k_step;
      apply<Scatter>(reinterpret_cast<T*>(p[0] + i * st[0] + j * j_d + (Scatter ? k : 0)),
                     reinterpret_cast<const T*>(p[1] + i * st[1] + j * j_s + (Scatter ? 0 : k)));
    };
    // Either loop order sums each output element in j order; walk the smaller stride inside.
    const bool j_inside = std::abs(x_step) < std::abs(st[2]);
    auto run = [&](int64_t b, int64_t e) {
      if (st[2] != 0 && j_inside) {
        for (int64_t i = b; i < e; ++i)
          for (int64_t j = 0; j < n; ++j) element(i, j);
        return;
      }
      for (int64_t j = 0; j < n; ++j) {
        if (st[2] != 0) {
          for (int64_t i = b; i < e; ++i) element(i, j);
          continue;
        }
        // One index for the whole run (index_select, index_add): whole rows, vectorised.
        char* dp = p[0] + j * j_d;
        const char* sp = p[1] + j * j_s;
        const int64_t k = int64_t(*reinterpret_cast<const I*>(p[2] + j * x_step)) * k_step;
        if constexpr (Scatter) dp += k;
        else sp += k;
        if (st[0] == es && st[1] == es) {
          apply_run<Scatter>(reinterpret_cast<T*>(dp), reinterpret_cast<const T*>(sp), b, e);
        } else {
          for (int64_t i = b; i < e; ++i)
            apply<Scatter>(reinterpret_cast<T*>(dp + i * st[0]), reinterpret_cast<const T*>(sp + i * st[1]));
        }
      }
    };
    // for_each_run splits many positions across threads; split one long run here (a
    // nested parallel_for runs serially), e.g. the columns of an embedding's gradient.
    parallel_for(0, m, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(n, 1)), run);
  });
}

// A 0-D or 1-D index viewed with `shape`: stride 0 everywhere but `dim`.
Tensor broadcast_index(const Tensor& index, const Shape& shape, int64_t dim) {
  Shape strides(shape.size(), 0);
  strides[size_t(dim)] = index.dim() == 0 ? 0 : index.stride(0);
  return alias_with(index, shape, strides, index.storage_offset());
}

// Elements before `dim` and after it, for contiguous tensors.
std::pair<int64_t, int64_t> outer_inner(const Shape& shape, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  return {outer, inner};
}

// Contiguous index_select: one memcpy per selected row, rows split across threads.
template <typename I>
void index_select_rows(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  const auto [outer, inner] = outer_inner(in.sizes(), dim);
  const int64_t n = index.numel(), in_rows = in.size(dim);
  const int64_t row_bytes = inner * in.element_size();
  const I* idx = static_cast<const I*>(index.data());
  const int64_t idx_stride = index.dim() == 0 ? 0 : index.stride(0);
  const char* src = static_cast<const char*>(in.data());
  char* dst = static_cast<char*>(out.data());
  parallel_for(0, outer * n, std::max<int64_t>(1, kParallelGrain / inner), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / n, k = int64_t(idx[(r % n) * idx_stride]);
      std::memcpy(dst + r * row_bytes, src + (o * in_rows + k) * row_bytes, size_t(row_bytes));
    }
  });
}

// One row of tril/triu: o[c] = x[c] for c in [keep_begin, keep_end), else 0 (strides in
// elements; inlined with 1, 1 for the contiguous loop).
template <typename T>
inline void mask_row(T* o, const T* x, int64_t o_col, int64_t x_col, int64_t cols,
                     int64_t keep_begin, int64_t keep_end) {
  for (int64_t c = 0; c < cols; ++c)
    o[c * o_col] = c >= keep_begin && c < keep_end ? x[c * x_col] : T(0);
}

// out[p, j] = in[p, index[p, j]] over index's shape (gather, general index_select).
void select_indexed(const char* op, const Tensor& out, const Tensor& in, int64_t dim,
                    const Tensor& index) {
  if (out.numel() == 0) return;
  dispatch_by_size(in.dtype(), [&]<typename T>() {
    dispatch_index(index.dtype(), op, [&]<typename I>() {
      indexed_loop<false, T, I>(out, in, index, dim, index.sizes());
    });
  });
}

// out[p, index[p, j]] += src[p, j] over index's shape (scatter_add, index_add).
void add_indexed(const char* op, const Tensor& out, int64_t dim, const Tensor& index,
                 const Tensor& src) {
  if (index.numel() == 0) return;
  dispatch_numeric(out.dtype(), op, [&]<typename T>() {
    dispatch_index(index.dtype(), op, [&]<typename I>() {
      indexed_loop<true, T, I>(out, src, index, dim, index.sizes());
    });
  });
}


void check_indices(const Tensor& index, int64_t size, const char* op) {
  if (index.numel() == 0) return;
  dispatch_index(index.dtype(), op, [&]<typename I>() {
    std::atomic<bool> bad{false};
    for_each_run<1>(index.sizes(), {&index}, [&](const std::array<char*, 1>& p,
                                                 const std::array<int64_t, 1>& st, int64_t m) {
      bool run_bad = false;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t k = int64_t(*reinterpret_cast<const I*>(p[0] + i * st[0]));
        run_bad |= k < 0 || k >= size;
      }
      if (run_bad) bad = true;
    });
    if (!bad) return;
    // Report the first bad index in row-major order.
    for (int64_t k : index.to_vector<int64_t>())
      LOOM_CHECK(k >= 0 && k < size, IndexError, index_out_of_range_message(op, k, size));
  });
}

void check_class_targets(const Tensor& target, int64_t classes, const char* op, const std::string& context) {
  if (target.numel() == 0) return;
  dispatch_index(target.dtype(), op, [&]<typename I>() {
    std::mutex mutex;
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for_each_run<1>(target.sizes(), {&target}, [&](const std::array<char*, 1>& p,
                                                   const std::array<int64_t, 1>& st, int64_t m) {
      int64_t run_lo = std::numeric_limits<int64_t>::max(), run_hi = std::numeric_limits<int64_t>::min();
      for (int64_t i = 0; i < m; ++i) {
        const int64_t k = int64_t(*reinterpret_cast<const I*>(p[0] + i * st[0]));
        run_lo = std::min(run_lo, k);
        run_hi = std::max(run_hi, k);
      }
      std::lock_guard<std::mutex> lock(mutex);
      lo = std::min(lo, run_lo);
      hi = std::max(hi, run_hi);
    });
    LOOM_CHECK(lo >= 0 && hi < classes, IndexError, class_out_of_range_message(op, lo < 0 ? lo : hi, classes, context));
  });
}

void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  const int64_t inner = outer_inner(in.sizes(), dim).second;
  if (out.is_contiguous() && in.is_contiguous() && inner * in.element_size() >= 32) {
    dispatch_index(index.dtype(), "index_select", [&]<typename I>() {
      index_select_rows<I>(out, in, dim, index);
    });
    return;
  }
  select_indexed("index_select", out, in, dim, broadcast_index(index, out.sizes(), dim));
}

void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  select_indexed("gather", out, in, dim, index);
}

void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  add_indexed("index_add", out, dim, broadcast_index(index, src.sizes(), dim), src);
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  add_indexed("scatter_add", out, dim, index, src);
}

void triangle(const Tensor& out, const Tensor& in, int64_t k, bool lower) {
  if (out.numel() == 0) return;
  const int64_t nd = out.dim(), rows = out.size(nd - 2), cols = out.size(nd - 1);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / cols);
  // Columns [0, split) of row r are kept by tril (col - row <= k), the rest by triu.
  auto keep_range = [&](int64_t r) -> std::pair<int64_t, int64_t> {
    const int64_t split = std::clamp<int64_t>(r + k + (lower ? 1 : 0), 0, cols);
    return lower ? std::pair<int64_t, int64_t>{0, split} : std::pair<int64_t, int64_t>{split, cols};
  };
  dispatch_by_size(out.dtype(), [&]<typename T>() {  // zero is all-zero bits in every dtype
    if (out.is_contiguous() && in.is_contiguous()) {  // all matrices' rows in one loop
      T* o = static_cast<T*>(out.data());
      const T* x = static_cast<const T*>(in.data());
      parallel_for(0, out.numel() / cols, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          auto [keep_begin, keep_end] = keep_range(r % rows);
          mask_row(o + r * cols, x + r * cols, 1, 1, cols, keep_begin, keep_end);
        }
      });
      return;
    }
    Shape batch = out.sizes();  // (..., 1, 1): one position per matrix
    batch[size_t(nd - 2)] = batch[size_t(nd - 1)] = 1;
    const Tensor ob = alias_with(out, batch, out.strides(), out.storage_offset());
    const Tensor ib = alias_with(in, batch, in.strides(), in.storage_offset());
    const int64_t o_row = out.stride(nd - 2), o_col = out.stride(nd - 1);
    const int64_t i_row = in.stride(nd - 2), i_col = in.stride(nd - 1);
    for_each_run<2>(batch, {&ob, &ib}, [&](const std::array<char*, 2>& p,
                                           const std::array<int64_t, 2>& st, int64_t m) {
      for (int64_t b = 0; b < m; ++b) {
        T* o = reinterpret_cast<T*>(p[0] + b * st[0]);
        const T* x = reinterpret_cast<const T*>(p[1] + b * st[1]);
        parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            auto [keep_begin, keep_end] = keep_range(r);
            mask_row(o + r * o_row, x + r * i_row, o_col, i_col, cols, keep_begin, keep_end);
          }
        });
      }
    });
  });
}

// Read where they lie: a CPU backend serving the emulated cuda:0 reads its host memory as
// a GPU's kernel would, without a counted copy.
void check_sequence_lengths(const Tensor& lengths, int64_t T, const char* op, const std::string& context) {
  const Tensor flat = lengths.contiguous();
  dispatch_index(flat.dtype(), op, [&]<typename I>() {
    const I* v = flat.data_ptr<I>();
    for (int64_t b = 0; b < flat.numel(); ++b)
      LOOM_CHECK(int64_t(v[b]) >= 1 && int64_t(v[b]) <= T, ValueError,
                 sequence_length_message(op, int64_t(v[b]), b, T, context));
  });
}

}  // namespace

void add_index_kernels(Backend& b) {
  b.index_select = &index_select;
  b.index_add = &index_add;
  b.gather = &gather;
  b.scatter_add = &scatter_add;
  b.triangle = &triangle;
  b.check_indices = &check_indices;
  b.check_class_targets = &check_class_targets;
  b.check_sequence_lengths = &check_sequence_lengths;
}

}  // namespace loom::kernels::cpu
