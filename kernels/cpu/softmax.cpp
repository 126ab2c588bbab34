// CPU softmax and log-softmax along one dim, and their backward.
//
// Note [softmax layout]
// The input is read as a contiguous (outer, len, inner) block around dim (a strided input
// is copied first, as PyTorch does). With inner == 1 every row of len elements is
// contiguous and takes three vectorised passes: the max, a fused exp(x - max) + sum that
// stores the exponentials, and a scaling pass (log_softmax: x - max - log(sum), with no
// stored exponentials). With inner > 1 a tile of up to kTile adjacent columns is processed
// together, so the innermost loops still run over contiguous memory. Subtracting the max
// first keeps every exp argument <= 0: nothing overflows, and exp_nonpositive applies.
// Everything computes in opmath (16-bit rows through a float copy), and the float kernels
// are compiled per x86 vector width (LOOM_CPU_CLONES).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/factories.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/backend.h"

namespace loom::kernels::cpu {
namespace {

// in as a contiguous (outer, len, inner) block around dim; a copy when in is strided.
Block block_around(const Tensor& in, int64_t dim) {
  Block b;
  b.x = in;
  if (!in.is_contiguous()) {
    b.x = empty(in.sizes(), in.options());
    copy(b.x, in);
  }
  for (int64_t d = 0; d < in.dim(); ++d) (d < dim ? b.outer : d == dim ? b.len : b.inner) *= in.size(d);
  return b;
}

// One contiguous row of n float or double elements; the exponentials are stored in y
// before scaling. y may equal x.
template <typename M>
void softmax_row(M* y, const M* x, int64_t n, bool log) {
  M mx = -std::numeric_limits<M>::infinity();
  // A select, not std::max (a reference): GCC vectorises only the former as a max.
#pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  // A NaN in the row makes sum NaN, and with it the whole row, as in PyTorch.
  M sum = 0;
  if (log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += exp_nonpositive(x[i] - mx);
    // (x - max) - log(sum), not x - (max + log(sum)): the latter rounds at max's scale.
    const M log_sum = std::log(sum);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mx) - log_sum;
    return;
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = exp_nonpositive(x[i] - mx);
    sum += y[i];
  }
  const M inv = M(1) / sum;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

// nc adjacent columns of a (len, inner) slab: column c is x[k * inner + c], k < len.
template <typename T, typename M = opmath_t<T>>
void softmax_columns(T* y, const T* x, int64_t len, int64_t inner, int64_t nc, bool log) {
  std::array<M, kTile> mx, sum;
  std::fill_n(mx.begin(), nc, -std::numeric_limits<M>::infinity());
  std::fill_n(sum.begin(), nc, M(0));
  for (int64_t k = 0; k < len; ++k) {
    for (int64_t c = 0; c < nc; ++c) {
      const M v = M(x[k * inner + c]);
      mx[c] = v > mx[c] ? v : mx[c];
    }
  }
  for (int64_t k = 0; k < len; ++k)
    for (int64_t c = 0; c < nc; ++c) sum[c] += exp_nonpositive(M(x[k * inner + c]) - mx[c]);
  for (int64_t c = 0; c < nc; ++c) sum[c] = log ? std::log(sum[c]) : M(1) / sum[c];
  for (int64_t k = 0; k < len; ++k) {
    for (int64_t c = 0; c < nc; ++c) {
      const M v = M(x[k * inner + c]) - mx[c];
      y[k * inner + c] = T(log ? v - sum[c] : exp_nonpositive(v) * sum[c]);
    }
  }
}

// Backward of one contiguous row: softmax gx = y (g - sum(g y)); log: gx = g - exp(y) sum(g).
template <typename T, typename M = opmath_t<T>>
void softmax_backward_row(T* gx, const T* g, const T* y, int64_t n, bool log) {
  M s = 0;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += M(g[i]);
    for (int64_t i = 0; i < n; ++i) gx[i] = T(M(g[i]) - exp_nonpositive(M(y[i])) * s);
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += M(g[i]) * M(y[i]);
    for (int64_t i = 0; i < n; ++i) gx[i] = T(M(y[i]) * (M(g[i]) - s));
  }
}

template <typename T, typename M = opmath_t<T>>
void softmax_backward_columns(T* gx, const T* g, const T* y, int64_t len, int64_t inner, int64_t nc,
                              bool log) {
  std::array<M, kTile> s;
  std::fill_n(s.begin(), nc, M(0));
  for (int64_t k = 0; k < len; ++k)
    for (int64_t c = 0; c < nc; ++c)
      s[c] += log ? M(g[k * inner + c]) : M(g[k * inner + c]) * M(y[k * inner + c]);
  for (int64_t k = 0; k < len; ++k) {
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t i = k * inner + c;
      gx[i] = T(log ? M(g[i]) - exp_nonpositive(M(y[i])) * s[c] : M(y[i]) * (M(g[i]) - s[c]));
    }
  }
}

// One tile of for_each_tile: a row (inner == 1) or nc columns of a (len, inner) slab.
LOOM_CPU_CLONES void softmax_tile_f32(float* y, const float* x, int64_t len, int64_t inner, int64_t nc,
                                      bool log) {
  if (inner == 1) softmax_row(y, x, len, log);
  else softmax_columns(y, x, len, inner, nc, log);
}

// Any floating type; 16-bit rows are computed in place in a float copy.
template <typename T>
void softmax_tile(T* y, const T* x, int64_t len, int64_t inner, int64_t nc, bool log) {
  if constexpr (std::is_same_v<T, float>) {
    softmax_tile_f32(y, x, len, inner, nc, log);
  } else if (inner > 1) {
    softmax_columns(y, x, len, inner, nc, log);
  } else if constexpr (std::is_same_v<T, double>) {
    softmax_row(y, x, len, log);
  } else {
    thread_local std::vector<float> row;
    row.assign(x, x + len);
    softmax_tile_f32(row.data(), row.data(), len, 1, 1, log);
    for (int64_t i = 0; i < len; ++i) y[i] = T(row[size_t(i)]);
  }
}

LOOM_CPU_CLONES void softmax_backward_tile_f32(float* gx, const float* g, const float* y, int64_t len,
                                               int64_t inner, int64_t nc, bool log) {
  if (inner == 1) softmax_backward_row(gx, g, y, len, log);
  else softmax_backward_columns(gx, g, y, len, inner, nc, log);
}

template <typename T>
void softmax_backward_tile(T* gx, const T* g, const T* y, int64_t len, int64_t inner, int64_t nc, bool log) {
  if constexpr (std::is_same_v<T, float>) softmax_backward_tile_f32(gx, g, y, len, inner, nc, log);
  else if (inner == 1) softmax_backward_row(gx, g, y, len, log);
  else softmax_backward_columns(gx, g, y, len, inner, nc, log);
}



void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  const Block b = block_around(in, dim);
  const Tensor y = contiguous_out(out);
  dispatch_floating(in.dtype(), "softmax", [&]<typename T>() {
    const T* x = static_cast<const T*>(b.x.data());
    T* yp = static_cast<T*>(y.data());
    for_each_tile(b, [&](int64_t o, int64_t c0, int64_t nc) {
      const int64_t base = o * b.len * b.inner + c0;
      softmax_tile<T>(yp + base, x + base, b.len, b.inner, nc, log);
    });
  });
  if (!y.is_same(out)) copy(out, y);
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& y_in, int64_t dim,
                      bool log) {
  if (grad_in.numel() == 0) return;
  const Block g = block_around(grad_out, dim);
  const Block y = block_around(y_in, dim);
  const Tensor gx = contiguous_out(grad_in);
  dispatch_floating(grad_in.dtype(), "softmax_backward", [&]<typename T>() {
    const T* gp = static_cast<const T*>(g.x.data());
    const T* yp = static_cast<const T*>(y.x.data());
    T* gxp = static_cast<T*>(gx.data());
    for_each_tile(g, [&](int64_t o, int64_t c0, int64_t nc) {
      const int64_t base = o * g.len * g.inner + c0;
      softmax_backward_tile<T>(gxp + base, gp + base, yp + base, g.len, g.inner, nc, log);
    });
  });
  if (!gx.is_same(grad_in)) copy(grad_in, gx);
}

}  // namespace

void add_softmax_kernels(Backend& b) {
  b.softmax = &softmax;
  b.softmax_backward = &softmax_backward;
}

}  // namespace loom::kernels::cpu
