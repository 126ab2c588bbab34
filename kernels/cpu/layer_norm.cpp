// CPU layer norm over the N elements of each row, forward and backward (kernels/norm/layer_norm.h).
//
// Note [fused layer norm]
// One pass over a row does what the composition of ops (nn::functional::detail::
// layer_norm_reference: mean, subtract, square, mean, add, rsqrt, multiply, multiply, add)
// does in ten passes over the whole (M, N) tensor, each reading and writing it, with a
// backward of as many again and the reductions of the broadcast weight and bias gradients.
// The forward keeps each row's mean and rstd = 1 / sqrt(var + eps) (the biased variance,
// from a second pass over the row while it is in L1: no cancellation). With
// xhat = (x - mean) rstd and g = dy weight, the backward is
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),
//   dweight = sum over the rows of dy xhat,   dbias = sum over the rows of dy,
// the last two summed per chunk of rows into that chunk's own partial sums, then over the
// chunks in order, so the result does not depend on which thread ran which chunk. The math
// runs in opmath (float for float32 and the 16-bit types, double for float64); a 16-bit row
// goes through a float copy of itself. The float loops are compiled per x86 vector width
// (LOOM_CPU_CLONES).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/fast_exp.h"

namespace loom::kernels::cpu {
namespace {

// ---- one row ------------------------------------------------------------------------------

// y = (x - mean) rstd w + b for one row of n; returns mean and rstd.
template <typename M>
inline void normalize_row(M* y, const M* x, int64_t n, const M* w, const M* b, M eps, M& mean_out, M& rstd_out) {
  M sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const M mean = sum / M(n);
  M squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < n; ++i) squares += (x[i] - mean) * (x[i] - mean);
  const M rstd = M(1) / std::sqrt(squares / M(n) + eps);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
  mean_out = mean;
  rstd_out = rstd;
}

// One row's backward: dw += dy xhat and db += dy (each if not null), and dx if not null.
template <typename M>
inline void row_backward(M* dx, M* dw, M* db, const M* dy, const M* x, int64_t n, const M* w, M mean, M rstd) {
  if (dw) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dw[i] += dy[i] * ((x[i] - mean) * rstd);
  }
  if (db) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) db[i] += dy[i];
  }
  if (!dx) return;
  M sum_g = 0, sum_g_xhat = 0;
#pragma omp simd reduction(+ : sum_g, sum_g_xhat)
  for (int64_t i = 0; i < n; ++i) {
    const M g = dy[i] * w[i];
    sum_g += g;
    sum_g_xhat += g * ((x[i] - mean) * rstd);
  }
  const M mean_g = sum_g / M(n), mean_g_xhat = sum_g_xhat / M(n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = rstd * (dy[i] * w[i] - mean_g - ((x[i] - mean) * rstd) * mean_g_xhat);
}

LOOM_CPU_CLONES void normalize_row_f32(float* y, const float* x, int64_t n, const float* w, const float* b,
                                       float eps, float& mean, float& rstd) {
  normalize_row(y, x, n, w, b, eps, mean, rstd);
}
LOOM_CPU_CLONES void row_backward_f32(float* dx, float* dw, float* db, const float* dy, const float* x, int64_t n,
                                      const float* w, float mean, float rstd) {
  row_backward(dx, dw, db, dy, x, n, w, mean, rstd);
}

template <typename M>
void normalize(M* y, const M* x, int64_t n, const M* w, const M* b, M eps, M& mean, M& rstd) {
  if constexpr (std::is_same_v<M, float>) normalize_row_f32(y, x, n, w, b, eps, mean, rstd);
  else normalize_row(y, x, n, w, b, eps, mean, rstd);
}
template <typename M>
void backward_row(M* dx, M* dw, M* db, const M* dy, const M* x, int64_t n, const M* w, M mean, M rstd) {
  if constexpr (std::is_same_v<M, float>) row_backward_f32(dx, dw, db, dy, x, n, w, mean, rstd);
  else row_backward(dx, dw, db, dy, x, n, w, mean, rstd);
}

// ---- rows of X through opmath M -------------------------------------------------------------

// Row r of a (rows, n) block of X as M: the row itself when X is M, else a copy in buf.
template <typename M, typename X>
const M* row_as(const X* p, int64_t r, int64_t n, std::vector<M>& buf) {
  if constexpr (std::is_same_v<X, M>) {
    return p + r * n;
  } else {
    std::transform(p + r * n, p + (r + 1) * n, buf.begin(), [](X v) { return M(v); });
    return buf.data();
  }
}

// Where row r of a (rows, n) block of X is written from M: the row itself, or buf.
template <typename M, typename X>
M* out_row(X* p, int64_t r, int64_t n, std::vector<M>& buf) {
  if constexpr (std::is_same_v<X, M>) return p + r * n;
  else return buf.data();
}

// Rounds buf into row r of p when out_row handed out buf.
template <typename M, typename X>
void store_row(X* p, int64_t r, int64_t n, const std::vector<M>& buf) {
  if constexpr (!std::is_same_v<X, M>)
    std::transform(buf.begin(), buf.begin() + n, p + r * n, [](M v) { return X(v); });
}

// t (n) of any float dtype as M; `fill` everywhere when t is undefined.
template <typename M>
std::vector<M> as_opmath(const Tensor& t, int64_t n, M fill) {
  std::vector<M> v(size_t(n), fill);
  if (t.defined())
    dispatch_floating(t.dtype(), "layer_norm", [&]<typename W>() {
      const W* p = static_cast<const W*>(t.data());
      for (int64_t i = 0; i < n; ++i) v[size_t(i)] = M(p[i]);
    });
  return v;
}

// t (n) = v, rounded to t's dtype.
template <typename M>
void store(const Tensor& t, const std::vector<M>& v) {
  dispatch_floating(t.dtype(), "layer_norm_backward", [&]<typename W>() {
    W* p = static_cast<W*>(t.data());
    for (size_t i = 0; i < v.size(); ++i) p[i] = W(v[i]);
  });
}

// Rows per chunk of parallel work: about kParallelGrain elements.
int64_t rows_per_chunk(int64_t n) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)); }

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t rows = x.size(0), n = x.size(1);
  if (rows == 0) return;
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename X>() {
    using M = opmath_t<X>;
    const std::vector<M> w = as_opmath<M>(weight, n, M(1)), b = as_opmath<M>(bias, n, M(0));
    const X* xp = static_cast<const X*>(x.data());
    X* yp = static_cast<X*>(y.data());
    M *mp = static_cast<M*>(mean.data()), *rp = static_cast<M*>(rstd.data());
    parallel_for(0, rows, rows_per_chunk(n), [&](int64_t r0, int64_t r1) {
      std::vector<M> x_row(std::is_same_v<X, M> ? 0 : size_t(n)), y_row(x_row.size());
      for (int64_t r = r0; r < r1; ++r) {
        M* y_r = out_row(yp, r, n, y_row);
        normalize(y_r, row_as<M>(xp, r, n, x_row), n, w.data(), b.data(), M(eps), mp[r], rp[r]);
        store_row(yp, r, n, y_row);
      }
    });
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const int64_t rows = x.size(0), n = x.size(1);
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<typename X>() {
    using M = opmath_t<X>;
    const std::vector<M> w = as_opmath<M>(weight, n, M(1));
    const X *xp = static_cast<const X*>(x.data()), *gp = static_cast<const X*>(dy.data());
    X* dxp = dx.defined() ? static_cast<X*>(dx.data()) : nullptr;
    const M *mp = static_cast<const M*>(mean.data()), *rp = static_cast<const M*>(rstd.data());
    // Fixed chunks of rows, each with its own partial dweight and dbias (n each).
    const int64_t per_chunk = rows_per_chunk(n), chunks = rows == 0 ? 0 : (rows + per_chunk - 1) / per_chunk;
    std::vector<M> dw_parts(dweight.defined() ? size_t(chunks * n) : 0, M(0));
    std::vector<M> db_parts(dbias.defined() ? size_t(chunks * n) : 0, M(0));
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      const size_t row_copy = std::is_same_v<X, M> ? 0 : size_t(n);
      std::vector<M> x_row(row_copy), g_row(row_copy), dx_row(row_copy);
      for (int64_t c = c0; c < c1; ++c) {
        M* dw = dw_parts.empty() ? nullptr : dw_parts.data() + c * n;
        M* db = db_parts.empty() ? nullptr : db_parts.data() + c * n;
        for (int64_t r = c * per_chunk; r < std::min(rows, (c + 1) * per_chunk); ++r) {
          M* dx_r = dxp ? out_row(dxp, r, n, dx_row) : nullptr;
          backward_row(dx_r, dw, db, row_as<M>(gp, r, n, g_row), row_as<M>(xp, r, n, x_row), n, w.data(), mp[r],
                       rp[r]);
          if (dxp) store_row(dxp, r, n, dx_row);
        }
      }
    });
    // dweight, dbias (n) = the chunks' partial sums, added in chunk order
    for (auto [grad, parts] : {std::pair{&dweight, &dw_parts}, std::pair{&dbias, &db_parts}}) {
      if (!grad->defined()) continue;
      std::vector<M> total(size_t(n), M(0));
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t i = 0; i < n; ++i) total[size_t(i)] += (*parts)[size_t(c * n + i)];
      store(*grad, total);
    }
  });
}

}  // namespace

void add_layer_norm_kernels(Backend& b) {
  b.layer_norm_forward = &layer_norm_forward;
  b.layer_norm_backward = &layer_norm_backward;
}

}  // namespace loom::kernels::cpu
