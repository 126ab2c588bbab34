// The CUDA side of optim::fused_update (optim/fused_update.h): one fused kernel per
// parameter that runs an optimizer's per-element math (optim/update_math.h) over the
// parameter, its gradient and its state tensors, on the current stream of p's device.
//
// Declared only in a CUDA build (LOOM_WITH_CUDA); implemented in optim_update.cu. The math
// comes in double and is narrowed to p's opmath type (float for float32 and the 16-bit
// floats, double for float64) as the CPU loop narrows it. p, g and the defined states must
// be contiguous, of p's dtype and size, and on p's device; an undefined state is a buffer
// the options switch off (a scratch value starting at 0, dropped). `op` names the
// optimizer in errors. The caller bumps p's version.
#pragma once

#include <array>

#include "core/tensor.h"
#include "optim/update_math.h"

namespace loom::kernels::cuda {

void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, 1>& states,
                  const optim::SgdMath<double>& math);
void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, 3>& states,
                  const optim::AdamMath<double>& math);
void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, 3>& states,
                  const optim::RmspropMath<double>& math);

}  // namespace loom::kernels::cuda
