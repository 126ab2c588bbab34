// The per-element math of the gradient scaler's kernels (amp::GradScaler,
// optim/grad_scaler.h), shared by the CPU loop (kernels/cpu/amp.cpp) and the CUDA kernels
// (kernels/cuda/amp.cu), as PyTorch's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_.
#pragma once

#include <cstdint>

#include "core/half.h"

namespace loom::kernels {

// A value of opmath type M is finite (no std::isfinite: not a device function).
template <typename M>
LOOM_HOST_DEVICE inline bool finite(M v) {
  return v == v && (v - v) == M(0);  // NaN != NaN; inf - inf is NaN
}

// The scale after one step: backed off when a gradient was not finite (and the run of good
// steps restarts), grown after growth_interval good steps in a row, unless growing would
// overflow float32.
LOOM_HOST_DEVICE inline void update_scale_math(float& scale, int32_t& growth_tracker, bool found_inf,
                                               float growth_factor, float backoff_factor,
                                               int32_t growth_interval) {
  if (found_inf) {
    scale *= backoff_factor;
    growth_tracker = 0;
    return;
  }
  const int32_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = scale * growth_factor;
    if (finite(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
}

}  // namespace loom::kernels
