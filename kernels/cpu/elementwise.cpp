// CPU elementwise kernels: unary, binary, where, copy (with casts) and fill.
#include "kernels/cpu/loops.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/functors.h"
#include "kernels/same_device.h"

namespace loom::kernels {

using cpu::check_cpu;
using cpu::elementwise;
using cpu::host_accessible;

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0, double arg1) {
  LOOM_DISPATCH_CUDA(out, unary, op, out, in, arg0, arg1);
  check_cpu(out, "unary");
  check_same_device(out, in, "unary");
  dispatch_all(in.dtype(), "unary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum(op, [&]<UnaryOp OP>() {
      Unary<OP, M> f{M(arg0), M(arg1)};
      if constexpr (outputs_bool(OP)) elementwise<bool, T>(out, f, {&in});
      else elementwise<T, T>(out, f, {&in});
    });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  LOOM_DISPATCH_CUDA(out, binary, op, out, a, b, alpha);
  check_cpu(out, "binary");
  check_same_device(out, a, "binary");
  check_same_device(out, b, "binary");
  dispatch_all(a.dtype(), "binary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum(op, [&]<BinaryOp OP>() {
      Binary<OP, M> f{M(alpha)};
      if constexpr (is_comparison(OP)) elementwise<bool, T, T>(out, f, {&a, &b});
      else elementwise<T, T, T>(out, f, {&a, &b});
    });
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  LOOM_DISPATCH_CUDA(out, where, out, cond, a, b);
  check_cpu(out, "where");
  check_same_device(out, cond, "where");
  check_same_device(out, a, "where");
  check_same_device(out, b, "where");
  dispatch_all(a.dtype(), "where", [&]<typename T>() {
    using M = opmath_t<T>;
    elementwise<T, bool, T, T>(out, [](bool c, M x, M y) { return c ? x : y; }, {&cond, &a, &b});
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  LOOM_DISPATCH_CUDA(dst, copy, dst, src);
  check_cpu(dst, "copy");
  check_cpu(src, "copy");
  if (dst.numel() == 0) return;
  // Same dtype, both contiguous: one memcpy.
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() &&
      dst.sizes() == src.sizes()) {
    std::memcpy(dst.data(), src.data(), dst.nbytes());
    return;
  }
  dispatch_all(dst.dtype(), "copy", [&]<typename D>() {
    dispatch_all(src.dtype(), "copy", [&]<typename S>() {
      elementwise<D, S>(dst, [](opmath_t<S> x) {
        if constexpr (std::is_same_v<D, bool>) return float(x) != 0.0f;
        else return opmath_t<D>(x);
      }, {&src});
    });
  });
}

void fill(const Tensor& dst, Scalar value) {
  LOOM_DISPATCH_CUDA(dst, fill, dst, value);
  check_cpu(dst, "fill");
  if (dst.numel() == 0) return;
  dispatch_all(dst.dtype(), "fill", [&]<typename T>() {
    const T v = value.to<T>();
    if (dst.is_contiguous()) {
      T* p = static_cast<T*>(dst.data());
      parallel_for(0, dst.numel(), kParallelGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
    } else {
      elementwise<T>(dst, [v]() { return v; }, {});
    }
  });
}

void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
#ifdef LOOM_WITH_CUDA
  // LOOM_DISPATCH_CUDA looks at one tensor; a transfer goes to CUDA when either side is there.
  if (dst.is_cuda() || src.is_cuda()) return cuda::copy_across_devices(dst, src, non_blocking);
#endif
  LOOM_CHECK(host_accessible(dst) && host_accessible(src), DeviceError, "copy from ", src.device(), " to ",
             dst.device(), ": Loom was built without CUDA support");
  copy(dst, src);  // (between the CPU and the host-emulated device of a test build)
}

}  // namespace loom::kernels
