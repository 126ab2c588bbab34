// CUDA elementwise kernels: unary, binary, where, copy (every dtype pair) and fill. The
// per-element math is kernels/functors.h, shared with the CPU (kernels/cpu/elementwise.cpp);
// the loop is gpu_elementwise (kernels/cuda/launch.cuh).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/functors.h"

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

void check_same_device(const Tensor& out, const Tensor& in, const char* op) {
  LOOM_CHECK(in.device() == out.device(), DeviceError, op, ": expected tensors on one device, got ", in.device(),
             " and ", out.device());
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0, double arg1) {
  check_same_device(out, in, "unary");
  dispatch_all(in.dtype(), "unary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum<UnaryOp, kNumUnaryOps>(op, [&]<UnaryOp OP>() {
      // The autograd layer rejects these before they get here; no kernel is compiled.
      if constexpr (unary_needs_float(OP) && !is_floating_v<T>) {
        throw DTypeError(::loom::detail::str("unary op ", int(OP), ": expected a floating-point tensor, got ",
                                     dtype_name(in.dtype())));
      } else {
        const Unary<OP, M> f{M(arg0), M(arg1)};
        if constexpr (OP == UnaryOp::LogicalNot) gpu_elementwise<bool, T>(out, f, {&in});
        else gpu_elementwise<T, T>(out, f, {&in});
      }
    });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  check_same_device(out, a, "binary");
  check_same_device(out, b, "binary");
  dispatch_all(a.dtype(), "binary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum<BinaryOp, kNumBinaryOps>(op, [&]<BinaryOp OP>() {
      if constexpr (binary_needs_float(OP) && !is_floating_v<T>) {
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

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device(out, cond, "where");
  check_same_device(out, a, "where");
  check_same_device(out, b, "where");
  LOOM_CHECK(cond.dtype() == kBool, DTypeError, "where: expected a bool condition, got ", dtype_name(cond.dtype()));
  dispatch_all(a.dtype(), "where", [&]<typename T>() {
    gpu_elementwise<T, bool, T, T>(out, WhereFunctor<opmath_t<T>>{}, {&cond, &a, &b});
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  check_same_device(dst, src, "copy");
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

}  // namespace loom::kernels::cuda
