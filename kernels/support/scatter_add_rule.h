// How a CUDA scatter-add (scatter_add; index_add off its sorted path; the backward of gather
// and index_select) adds into its output: with atomics, or one thread per output position
// walking the index in order (Note [CUDA indexed loops] in kernels/cuda/index.cu). A host
// rule, so that the CPU tests check it (Note [deterministic algorithms]).
#pragma once

#include "core/deterministic.h"
#include "core/dtype.h"

namespace loom::kernels {

// The 16-bit floats have no exact atomic add; in deterministic mode a float32/64 sum's order
// must not depend on scheduling. Integer atomics are exact: the same sum in any order.
inline bool scatter_add_in_order(DType dtype) {
  if (dtype == kFloat16 || dtype == kBFloat16) return true;
  return is_floating_point(dtype) && are_deterministic_algorithms_enabled();
}

}  // namespace loom::kernels
