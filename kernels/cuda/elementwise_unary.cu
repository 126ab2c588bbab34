// CUDA unary elementwise kernels (every UnaryOp, every dtype it applies to).
// The per-element math is kernels/math/functors.h, shared with the CPU (kernels/cpu/elementwise.cpp);
// the loop is gpu_elementwise (kernels/cuda/launch.cuh). The elementwise entry points are
// split over three files (unary, binary, copy) so that their many kernel instantiations
// (op x dtype x path) compile in parallel: as one file it took nvcc minutes.
#include <cuda_runtime.h>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/functors.h"

namespace loom::kernels::cuda {

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0, double arg1, double arg2) {
  dispatch_all(in.dtype(), "unary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum(op, [&]<UnaryOp OP>() {
      // The autograd layer rejects these before they get here; no kernel is compiled.
      if constexpr (needs_float(OP) && !is_floating_v<T>) {
        throw DTypeError(::loom::detail::str("unary op ", int(OP), ": expected a floating-point tensor, got ",
                                     dtype_name(in.dtype())));
      } else {
        const Unary<OP, M> f{M(arg0), M(arg1), M(arg2)};
        if constexpr (outputs_bool(OP)) gpu_elementwise<bool, T>(out, f, {&in});
        else gpu_elementwise<T, T>(out, f, {&in});
      }
    });
  });
}

void add_unary_kernels(Backend& b) { b.unary = &unary; }

}  // namespace loom::kernels::cuda
