// Per-element math of the elementwise ops, shared by the CPU loops and (later) the CUDA
// kernels: each functor is a LOOM_HOST_DEVICE call operator on opmath values (float for
// the 16-bit floats), so the CPU tests already cover the math.
#pragma once

#include <cmath>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace loom::kernels {

template <typename T>
LOOM_HOST_DEVICE inline T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// The constants of GELU: erf form 0.5 x (1 + erf(x / sqrt 2)), tanh form
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// Calls f.template operator()<E(i)>() for the enumerator equal to e, so the op becomes a
// template argument and each loop body is compiled (and vectorised) per op. E is one of
// the op enums (kernels/math/elementwise_ops.h): it ends with kCount, and a value outside
// [0, kCount) is a Loom bug that would otherwise run nothing and leave the output unwritten.
template <typename E, typename F>
void dispatch_enum(E e, F&& f) {
  constexpr int count = int(E::kCount);
  LOOM_ASSERT(int(e) >= 0 && int(e) < count, "dispatch_enum: ", kEnumName<E>, " value ", int(e),
              " is out of range (", kEnumName<E>, " has ", count, " ops)");
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((int(e) == I ? (f.template operator()<E(I)>(), 0) : 0), ...);
  }(std::make_integer_sequence<int, count>{});
}

template <typename T>
LOOM_HOST_DEVICE inline T ipow(T base, T exp) {
  T r = 1;
  for (T i = 0; i < exp; ++i) r = T(r * base);
  return r;
}

template <UnaryOp OP, typename T>
struct Unary {
  T arg0, arg1, arg2;
  LOOM_HOST_DEVICE T operator()(T x) const {
    if constexpr (OP == UnaryOp::LogicalNot) return T(x == T(0));
    else if constexpr (OP == UnaryOp::IsFinite || OP == UnaryOp::IsNan || OP == UnaryOp::IsInf) {
      if constexpr (!is_floating_v<T>) return T(OP == UnaryOp::IsFinite);  // integers are finite
      else {
        // No std::isfinite: it is not a device function, and these work for any opmath T.
        const bool nan = x != x;
        const bool inf = !nan && (x - x) != T(0);  // inf - inf is NaN
        return T(OP == UnaryOp::IsNan ? nan : OP == UnaryOp::IsInf ? inf : !(nan || inf));
      }
    }
    else if constexpr (std::is_same_v<T, bool>) return x;  // abs/relu/sign/clamp of bool
    else if constexpr (OP == UnaryOp::Neg) return T(-x);
    else if constexpr (OP == UnaryOp::Abs) return x < T(0) ? T(-x) : x;
    else if constexpr (OP == UnaryOp::Sign) return T((x > T(0)) - (x < T(0)));
    else if constexpr (OP == UnaryOp::Relu) return x > T(0) ? x : (x != x ? x : T(0));  // keeps NaN
    else if constexpr (OP == UnaryOp::Clamp) return x < arg0 ? arg0 : (x > arg1 ? arg1 : x);
    else if constexpr (OP == UnaryOp::NanToNum) {
      if (x != x) return arg0;
      if ((x - x) != T(0)) return x > T(0) ? arg1 : arg2;
      return x;
    }
    else if constexpr (OP == UnaryOp::AddScalar) return T(x + arg0);
    else if constexpr (OP == UnaryOp::MulScalar) return T(x * arg0);
    else if constexpr (OP == UnaryOp::PowScalar) {
      if constexpr (std::is_integral_v<T>) return ipow(x, arg0);
      else return arg0 == T(2) ? x * x : std::pow(x, arg0);
    } else if constexpr (std::is_integral_v<T>) return x;  // float-only ops: rejected earlier
    else if constexpr (OP == UnaryOp::Exp) return std::exp(x);
    else if constexpr (OP == UnaryOp::Log) return std::log(x);
    else if constexpr (OP == UnaryOp::Log1p) return std::log1p(x);
    else if constexpr (OP == UnaryOp::Sqrt) return std::sqrt(x);
    else if constexpr (OP == UnaryOp::Rsqrt) return T(1) / std::sqrt(x);
    else if constexpr (OP == UnaryOp::Sin) return std::sin(x);
    else if constexpr (OP == UnaryOp::Cos) return std::cos(x);
    else if constexpr (OP == UnaryOp::Tanh) return std::tanh(x);
    else if constexpr (OP == UnaryOp::Sigmoid) return sigmoid_of(x);
    else if constexpr (OP == UnaryOp::Gelu) return T(0.5) * x * (T(1) + std::erf(x * T(kSqrtHalf)));
    else if constexpr (OP == UnaryOp::GeluTanh)
      return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
    else if constexpr (OP == UnaryOp::Silu) return x * sigmoid_of(x);
    else return x;
  }
};

template <BinaryOp OP, typename T>
struct Binary {
  T alpha;
  LOOM_HOST_DEVICE auto operator()(T a, T b) const {
    if constexpr (is_comparison(OP)) {
      if constexpr (OP == BinaryOp::Eq) return a == b;
      else if constexpr (OP == BinaryOp::Ne) return a != b;
      else if constexpr (OP == BinaryOp::Lt) return a < b;
      else if constexpr (OP == BinaryOp::Le) return a <= b;
      else if constexpr (OP == BinaryOp::Gt) return a > b;
      else return a >= b;
    } else if constexpr (std::is_same_v<T, bool>) {
      if constexpr (OP == BinaryOp::Add || OP == BinaryOp::Maximum) return bool(a || b);
      else if constexpr (OP == BinaryOp::Mul || OP == BinaryOp::Minimum) return bool(a && b);
      else return a;  // rejected earlier
    } else if constexpr (OP == BinaryOp::Add) return T(a + alpha * b);
    else if constexpr (OP == BinaryOp::Sub) return T(a - alpha * b);
    else if constexpr (OP == BinaryOp::Mul) return T(a * b);
    else if constexpr (OP == BinaryOp::Div) {
      if constexpr (std::is_integral_v<T>) {
        // Integer division rounds toward negative infinity (torch's 'floor' mode);
        // the caller rejects a zero divisor.
        T q = T(a / b);
        return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
      } else {
        return a / b;
      }
    } else if constexpr (OP == BinaryOp::Pow) {
      if constexpr (std::is_integral_v<T>) return ipow(a, b);
      else return std::pow(a, b);
    } else if constexpr (OP == BinaryOp::Maximum) return (a != a || a > b) ? a : b;  // NaN wins
    else if constexpr (OP == BinaryOp::Minimum) return (a != a || a < b) ? a : b;
    else if constexpr (std::is_integral_v<T>) return a;  // float-only: rejected earlier
    else if constexpr (OP == BinaryOp::TanhBackward) return a * (T(1) - b * b);
    else if constexpr (OP == BinaryOp::SigmoidBackward) return a * b * (T(1) - b);
    else if constexpr (OP == BinaryOp::ReluBackward) return b > T(0) ? a : T(0);
    else if constexpr (OP == BinaryOp::GeluBackward) {
      T cdf = T(0.5) * (T(1) + std::erf(b * T(kSqrtHalf)));
      T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * b * b);
      return a * (cdf + b * pdf);
    } else if constexpr (OP == BinaryOp::GeluTanhBackward) {
      T inner = T(kSqrt2OverPi) * (b + T(0.044715) * b * b * b);
      T th = std::tanh(inner);
      T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * b * b);
      return a * (T(0.5) * (T(1) + th) + T(0.5) * b * (T(1) - th * th) * dinner);
    } else {  // SiluBackward
      T s = sigmoid_of(b);
      return a * s * (T(1) + b * (T(1) - s));
    }
  }
};

}  // namespace loom::kernels
