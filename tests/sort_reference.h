// Plain reference loops for sort, argsort and topk (tests/test_sort.cpp and the CUDA
// tests): std::stable_sort of each slice with NaN as the largest value, written apart
// from the kernels' total order (kernels/math/sort_math.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/factories.h"
#include "core/tensor.h"

namespace loom::test {

struct SortReference {
  Shape shape;                  // x's shape with size(dim) = k
  std::vector<double> values;   // row-major in `shape`
  std::vector<int64_t> indices;
};

// The first k of x's stable order along dim (dim already wrapped, x not 0-dim).
inline SortReference reference_sort(const Tensor& x, int64_t dim, bool descending, int64_t k) {
  const std::vector<double> v = x.contiguous().to_vector<double>();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = x.size(dim);
  SortReference ref{x.sizes(), {}, {}};
  ref.shape[size_t(dim)] = k;
  ref.values.resize(size_t(outer * k * inner));
  ref.indices.resize(ref.values.size());
  auto less = [](double a, double b) { return a < b || (!std::isnan(a) && std::isnan(b)); };
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return v[size_t((o * n + i) * inner + j)]; };
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), int64_t(0));
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return descending ? less(at(b), at(a)) : less(at(a), at(b));
      });
      for (int64_t t = 0; t < k; ++t) {
        const size_t out = size_t((o * k + t) * inner + j);
        ref.values[out] = at(order[size_t(t)]);
        ref.indices[out] = order[size_t(t)];
      }
    }
  }
  return ref;
}

// Element-for-element equality, NaN equal to NaN.
inline bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// Random values with many ties (integers in [0, 5)) and, in floating dtypes, some NaNs.
inline Tensor tied_values(const Shape& shape, DType dtype) {
  Tensor x = randint(0, 5, shape, kInt64).to(kFloat64);
  if (is_floating_point(dtype)) x = x.masked_fill(rand(shape, kFloat64) < 0.1, std::nan(""));
  return x.to(dtype);
}

}  // namespace loom::test
