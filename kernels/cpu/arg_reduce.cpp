// CPU reductions along dims that are not a plain fold: max/min with their indices,
// variance, and the running sum (cumsum).
//
// Note [block layout]
// Each kernel reads its input as a contiguous (outer, len, inner) block, len spanning the
// reduced dims, as kernels/cpu/reduce.cpp does: a view when the input is contiguous and
// the dims are adjacent, else a copy with the reduced dims moved last (inner == 1). Tiles
// of up to kTile adjacent inner columns are then processed together, so with inner > 1
// the innermost loops still run over contiguous memory.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/backend.h"

namespace loom::kernels::cpu {
namespace {

Block block_around(const Tensor& in, const Dims& dims) {
  Block b;
  b.x = in;
  const bool adjacent = dims.back() - dims.front() + 1 == int64_t(dims.size());
  if (in.is_contiguous() && adjacent) {
    for (int64_t d = 0; d < in.dim(); ++d)
      (d < dims.front() ? b.outer : d <= dims.back() ? b.len : b.inner) *= in.size(d);
    return b;
  }
  for (int64_t d = 0; d < in.dim(); ++d) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced) b.order.push_back(d);
    (reduced ? b.len : b.outer) *= in.size(d);
  }
  b.order.insert(b.order.end(), dims.begin(), dims.end());
  const Tensor permuted = in.detach().permute(b.order);
  b.x = empty(permuted.sizes(), permuted.options());
  copy(b.x, permuted);
  return b;
}

template <typename M>
bool is_nan(M v) {
  return v != v;  // false for integers
}

// Best value and first index of nc columns of a (len, inner) slab; a NaN beats anything.
template <typename T, typename M = opmath_t<T>>
void arg_reduce_columns(T* values, int64_t* indices, const T* x, int64_t len, int64_t inner,
                        int64_t nc, bool is_max) {
  std::array<M, kTile> best;
  std::array<int64_t, kTile> at{};
  for (int64_t c = 0; c < nc; ++c) best[c] = M(x[c]);
  for (int64_t k = 1; k < len; ++k) {
    for (int64_t c = 0; c < nc; ++c) {
      const M v = M(x[k * inner + c]);
      const bool better = is_max ? v > best[c] : v < best[c];
      if (better || (is_nan(v) && !is_nan(best[c]))) {
        best[c] = v;
        at[c] = k;
      }
    }
  }
  for (int64_t c = 0; c < nc; ++c) {
    values[c] = T(best[c]);
    indices[c] = at[c];
  }
}

// Two passes (mean, then squared deviations) over nc columns, in opmath.
template <typename T, typename M = opmath_t<T>>
void variance_columns(T* out, const T* x, int64_t len, int64_t inner, int64_t nc, M divisor) {
  std::array<M, kTile> mean{}, ss{};
  for (int64_t k = 0; k < len; ++k)
    for (int64_t c = 0; c < nc; ++c) mean[c] += M(x[k * inner + c]);
  for (int64_t c = 0; c < nc; ++c) mean[c] /= M(len);
  for (int64_t k = 0; k < len; ++k) {
    for (int64_t c = 0; c < nc; ++c) {
      const M d = M(x[k * inner + c]) - mean[c];
      ss[c] += d * d;
    }
  }
  for (int64_t c = 0; c < nc; ++c) out[c] = T(ss[c] / divisor);
}

// The same for one contiguous row, as SIMD reductions.
template <typename T, typename M = opmath_t<T>>
T variance_row(const T* x, int64_t len, M divisor) {
  M sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t k = 0; k < len; ++k) sum += M(x[k]);
  const M mean = sum / M(len);
  M ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t k = 0; k < len; ++k) ss += (M(x[k]) - mean) * (M(x[k]) - mean);
  return T(ss / divisor);
}

template <typename T, typename M = opmath_t<T>>
void cumsum_columns(T* y, const T* x, int64_t len, int64_t inner, int64_t nc) {
  std::array<M, kTile> acc{};
  for (int64_t k = 0; k < len; ++k) {
    for (int64_t c = 0; c < nc; ++c) {
      acc[c] += M(x[k * inner + c]);
      y[k * inner + c] = T(acc[c]);
    }
  }
}


void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  const char* name = is_max ? "max" : "min";
  LOOM_ASSERT(in.size(dim) > 0 && indices.dtype() == kInt64, name, ": bad arguments");
  if (values.numel() == 0) return;
  const Block b = block_around(in, {dim});
  const Tensor v = contiguous_out(values), ix = contiguous_out(indices);
  dispatch_all(in.dtype(), name, [&]<typename T>() {
    const T* x = static_cast<const T*>(b.x.data());
    T* vp = static_cast<T*>(v.data());
    int64_t* ip = static_cast<int64_t*>(ix.data());
    for_each_tile(b, [&](int64_t o, int64_t c0, int64_t nc) {
      const int64_t at = o * b.inner + c0;
      arg_reduce_columns<T>(vp + at, ip + at, x + o * b.len * b.inner + c0, b.len, b.inner, nc, is_max);
    });
  });
  if (!v.is_same(values)) copy(values, v);
  if (!ix.is_same(indices)) copy(indices, ix);
}

void variance(const Tensor& out, const Tensor& in, const Dims& dims, int64_t correction) {
  LOOM_ASSERT(!dims.empty() && out.dtype() == in.dtype(), "var: bad arguments");
  if (out.numel() == 0) return;
  const Block b = block_around(in, dims);
  const Tensor o = contiguous_out(out);
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using M = opmath_t<T>;
    // As PyTorch: a divisor <= 0 gives inf (or nan for 0 / 0), and an empty len gives nan.
    const M divisor = M(std::max<int64_t>(b.len - correction, 0));
    const T* x = static_cast<const T*>(b.x.data());
    T* op = static_cast<T*>(o.data());
    for_each_tile(b, [&](int64_t r, int64_t c0, int64_t nc) {
      const T* slab = x + r * b.len * b.inner + c0;
      if (b.inner == 1) op[r] = variance_row<T>(slab, b.len, divisor);
      else variance_columns<T>(op + r * b.inner + c0, slab, b.len, b.inner, nc, divisor);
    });
  });
  if (!o.is_same(out)) copy(out, o);
}

void cumsum(const Tensor& out, const Tensor& in, int64_t dim) {
  LOOM_ASSERT(out.dtype() == in.dtype(), "cumsum: bad arguments");
  if (out.numel() == 0) return;
  const Block b = block_around(in, {dim});
  // The result in b.x's layout: out itself, or a buffer copied back through the permutation.
  const Tensor y = b.order.empty() ? contiguous_out(out) : empty(b.x.sizes(), b.x.options());
  dispatch_numeric(in.dtype(), "cumsum", [&]<typename T>() {
    const T* x = static_cast<const T*>(b.x.data());
    T* yp = static_cast<T*>(y.data());
    for_each_tile(b, [&](int64_t o, int64_t c0, int64_t nc) {
      const int64_t base = o * b.len * b.inner + c0;
      cumsum_columns<T>(yp + base, x + base, b.len, b.inner, nc);
    });
  });
  if (!b.order.empty()) copy(out.detach().permute(b.order), y);
  else if (!y.is_same(out)) copy(out, y);
}

}  // namespace

void add_arg_reduce_kernels(Backend& b) {
  b.arg_reduce = &arg_reduce;
  b.variance = &variance;
  b.cumsum = &cumsum;
}

}  // namespace loom::kernels::cpu
