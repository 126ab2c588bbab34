// CUDA binary elementwise kernels (every BinaryOp, comparisons to bool, fused backward formulas).
// The per-element math is kernels/math/functors.h, shared with the CPU (kernels/cpu/elementwise.cpp);
// the loop is gpu_elementwise (kernels/cuda/launch.cuh). The elementwise entry points are
// split over three files (unary, binary, copy) so that their many kernel instantiations
// (op x dtype x path) compile in parallel: as one file it took nvcc minutes.
#include <cuda_runtime.h>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/functors.h"

namespace loom::kernels::cuda {

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  dispatch_all(a.dtype(), "binary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum(op, [&]<BinaryOp OP>() {
      if constexpr (needs_float(OP) && !is_floating_v<T>) {
        throw DTypeError(::loom::detail::str("binary op ", int(OP), ": expected floating-point tensors, got ",
                                     dtype_name(a.dtype())));
      } else {
        const Binary<OP, M> f{M(alpha)};
        if constexpr (is_comparison(OP)) gpu_elementwise<bool, T, T>(out, f, {&a, &b});
        else gpu_elementwise<T, T, T>(out, f, {&a, &b});
      }
    });
  });
}

void add_binary_kernels(Backend& b) { b.binary = &binary; }

}  // namespace loom::kernels::cuda
