// The per-element math of the reductions (sum, mean, max, min, prod): the identity each
// starts from, how two values combine, and the final step. Shared by the CPU loops
// (kernels/cpu/reduce.cpp) and the CUDA kernels (kernels/cuda/reduce.cu), in opmath.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "kernels/kernels.h"

namespace loom::kernels {

template <ReduceOp OP, typename M>
struct ReduceMath {
  LOOM_HOST_DEVICE static M identity() {
    if constexpr (OP == ReduceOp::Prod) return M(1);
    // Floats start at -inf/+inf, not lowest()/max(), so that a row of infinities keeps them.
    else if constexpr (OP == ReduceOp::Max && std::is_floating_point_v<M>) return -std::numeric_limits<M>::infinity();
    else if constexpr (OP == ReduceOp::Min && std::is_floating_point_v<M>) return std::numeric_limits<M>::infinity();
    else if constexpr (OP == ReduceOp::Max) return std::numeric_limits<M>::lowest();
    else if constexpr (OP == ReduceOp::Min) return std::numeric_limits<M>::max();
    else return M(0);
  }
  LOOM_HOST_DEVICE static M combine(M acc, M x) {
    if constexpr (OP == ReduceOp::Prod) return acc * x;
    else if constexpr (OP == ReduceOp::Max) return (x != x || x > acc) ? x : acc;  // NaN wins
    else if constexpr (OP == ReduceOp::Min) return (x != x || x < acc) ? x : acc;
    else return acc + x;
  }
  LOOM_HOST_DEVICE static M finish(M acc, int64_t n) {
    if constexpr (OP == ReduceOp::Mean && std::is_floating_point_v<M>) return n == 0 ? M(NAN) : acc / M(n);
    else return acc;
  }
};

}  // namespace loom::kernels
