// CPU elementwise kernels: unary, binary, where, copy (with casts) and fill.
#include "kernels/cpu/backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/math/functors.h"

namespace loom::kernels::cpu {
namespace {

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0, double arg1, double arg2) {
  dispatch_all(in.dtype(), "unary", [&]<typename T>() {
    using M = opmath_t<T>;
    dispatch_enum(op, [&]<UnaryOp OP>() {
      Unary<OP, M> f{M(arg0), M(arg1), M(arg2)};
      if constexpr (outputs_bool(OP)) elementwise<bool, T>(out, f, {&in});
      else elementwise<T, T>(out, f, {&in});
    });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
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
  dispatch_all(a.dtype(), "where", [&]<typename T>() {
    using M = opmath_t<T>;
    elementwise<T, bool, T, T>(out, [](bool c, M x, M y) { return c ? x : y; }, {&cond, &a, &b});
  });
}

void copy(const Tensor& dst, const Tensor& src) {
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

// Both sides in host memory (the CPU, or a device emulated in it): a plain copy.
void copy_across_devices(const Tensor& dst, const Tensor& src, bool /*non_blocking*/) { copy(dst, src); }

}  // namespace

void add_elementwise_kernels(Backend& b) {
  b.unary = &unary;
  b.binary = &binary;
  b.where = &where;
  b.copy = &copy;
  b.copy_across_devices = &copy_across_devices;
  b.fill = &fill;
}

}  // namespace loom::kernels::cpu
