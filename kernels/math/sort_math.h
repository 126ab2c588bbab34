// The order of sort, argsort and topk, shared by the CPU kernel (kernels/cpu/sort.cpp)
// and the CUDA one (kernels/cuda/sort.cu) so both put every element in the same place.
//
// Note [sort order]
// As PyTorch: NaN sorts as the largest value (last ascending, first descending), and
// equal elements keep their input order (a stable sort), in both directions. Breaking
// ties by index makes the order a strict total order over (value, index) pairs, so any
// correct sort (std::sort, a bitonic network) gives the one stable result, and topk is
// the first k of it: of tied values, the lowest indices are chosen, first. (PyTorch
// leaves topk's choice among ties unspecified; this is what its stable sort gives.)
// -0.0 and 0.0 compare equal and keep their input order.
#pragma once

#include <cstdint>

#include "core/half.h"

namespace loom::kernels::sort_math {

template <typename M>
LOOM_HOST_DEVICE inline bool is_nan(M v) {
  return v != v;  // false for integers and bool
}

// Whether value a at index ia comes before value b at index ib (a strict total order).
template <typename M>
LOOM_HOST_DEVICE inline bool sorts_before(M a, int64_t ia, M b, int64_t ib, bool descending) {
  const bool a_nan = is_nan(a), b_nan = is_nan(b);
  if (a_nan || b_nan) return a_nan && b_nan ? ia < ib : (descending ? a_nan : b_nan);
  if (a == b) return ia < ib;
  return descending ? a > b : a < b;
}

}  // namespace loom::kernels::sort_math
