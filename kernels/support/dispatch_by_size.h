// Kernels that only move elements (index_select, gather, tril/triu, zero fills) need no
// arithmetic, so they dispatch on the element's size, not its dtype: one instantiation
// per width (1, 2, 4, 8 bytes) serves all seven dtypes. Used by the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace loom::kernels {

// Calls fn.template operator()<U>() with U the unsigned integer of t's width.
template <typename F>
decltype(auto) dispatch_by_size(DType t, F&& fn) {
  switch (element_size(t)) {
    case 1: return fn.template operator()<uint8_t>();
    case 2: return fn.template operator()<uint16_t>();
    case 4: return fn.template operator()<uint32_t>();
    default: return fn.template operator()<uint64_t>();
  }
}

}  // namespace loom::kernels
