// Routing a kernel entry point (kernels/kernels.h) to its CUDA implementation.
//
// The entry points are defined with their CPU implementations in kernels/cpu/. Each one
// that has a CUDA version starts with
//   LOOM_DISPATCH_CUDA(out, unary, op, out, in, arg0, arg1);
// which, in a CUDA build, calls kernels::cuda::unary(...) and returns when `out` lives on
// a GPU. Without the CUDA backend it expands to nothing: no tensor can live on a GPU then
// (allocation throws a DeviceError saying Loom was built without CUDA).
#pragma once

#ifdef LOOM_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#define LOOM_DISPATCH_CUDA(tensor, fn, ...)       \
  do {                                            \
    if ((tensor).is_cuda()) {                     \
      ::loom::kernels::cuda::fn(__VA_ARGS__);     \
      return;                                     \
    }                                             \
  } while (0)
#else
#define LOOM_DISPATCH_CUDA(tensor, fn, ...) \
  do {                                      \
  } while (0)
#endif
