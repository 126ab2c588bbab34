// CUDA where, copy (every dtype pair, as the CPU converts) and fill.
// The per-element math is kernels/math/functors.h, shared with the CPU (kernels/cpu/elementwise.cpp);
// the loop is gpu_elementwise (kernels/cuda/launch.cuh). The elementwise entry points are
// split over three files (unary, binary, copy) so that their many kernel instantiations
// (op x dtype x path) compile in parallel: as one file it took nvcc minutes.
#include <cuda_runtime.h>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/functors.h"

namespace loom::kernels::cuda {

namespace {

template <typename M>
struct WhereFunctor {
  LOOM_HOST_DEVICE M operator()(bool c, M x, M y) const { return c ? x : y; }
};

// S -> D as the CPU copy converts: through D's opmath type, and to bool by != 0 in float.
template <typename D, typename S>
struct CastFunctor {
  LOOM_HOST_DEVICE auto operator()(opmath_t<S> x) const {
    if constexpr (std::is_same_v<D, bool>) return float(x) != 0.0f;
    else return opmath_t<D>(x);
  }
};

template <typename T>
struct FillFunctor {
  T value;
  LOOM_HOST_DEVICE T operator()() const { return value; }
};

}  // namespace

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(cond.dtype() == kBool, DTypeError, "where: expected a bool condition, got ", dtype_name(cond.dtype()));
  dispatch_all(a.dtype(), "where", [&]<typename T>() {
    gpu_elementwise<T, bool, T, T>(out, WhereFunctor<opmath_t<T>>{}, {&cond, &a, &b});
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  // Same dtype, both contiguous: one device-to-device memcpy.
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes()) {
    if (dst.data() == src.data()) return;
    ::loom::cuda::DeviceGuard guard(dst.device());
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                    current_stream(dst.device().index)));
    return;
  }
  dispatch_all(dst.dtype(), "copy", [&]<typename D>() {
    dispatch_all(src.dtype(), "copy", [&]<typename S>() {
      gpu_elementwise<D, S>(dst, CastFunctor<D, S>{}, {&src});
    });
  });
}

void fill(const Tensor& dst, Scalar value) {
  dispatch_all(dst.dtype(), "fill", [&]<typename T>() {
    gpu_elementwise<T>(dst, FillFunctor<T>{value.to<T>()}, {});
  });
}

void add_copy_kernels(Backend& b) {
  b.where = &where;
  b.copy = &copy;
  b.fill = &fill;
}

}  // namespace loom::kernels::cuda
