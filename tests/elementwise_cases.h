// What the kernel tests feed each elementwise op and what it must give: one row per
// enumerator, in the order of the op tables (kernels/math/elementwise_ops.h, Note [op tables]).
// One table for both devices: test_elementwise.cpp runs every CPU kernel against `ref`,
// test_cuda_kernels.cpp every CUDA kernel against the CPU. The dtypes each op runs in
// and its output dtype come from the op's row, so an op added there without a row here
// does not compile.
#pragma once

#include <cmath>
#include <iterator>
#include <string>

#include "kernels/math/elementwise_ops.h"

namespace loom::test {

struct UnaryOpCase {
  kernels::UnaryOp op;
  double (*ref)(double x, double arg0, double arg1);  // the op in double
  double low = -2.0, high = 2.0;  // the range of random inputs (log, sqrt, ... of negatives are NaN)
  double arg0 = 0, arg1 = 0;      // the kernel's scalar arguments
};

struct BinaryOpCase {
  kernels::BinaryOp op;
  double (*ref)(double a, double b, double alpha);
  double a_low = -2.0, a_high = 2.0;  // a's range (pow of a negative base is NaN); b is in [-2, 2]
};

// The alpha every binary kernel test passes (only add and sub read it).
inline constexpr double kBinaryAlpha = 2.0;

inline double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
inline double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
// Their derivatives, for the fused backward formulas.
inline double d_gelu_ref(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
inline double d_gelu_tanh_ref(double x) {
  const double t = std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}
inline double d_silu_ref(double x) { return sigmoid_ref(x) * (1 + x * (1 - sigmoid_ref(x))); }

using kernels::BinaryOp;
using kernels::UnaryOp;

inline constexpr UnaryOpCase kUnaryOpCases[] = {
    {UnaryOp::Neg, [](double x, double, double) { return -x; }},
    {UnaryOp::Abs, [](double x, double, double) { return std::abs(x); }},
    {UnaryOp::Exp, [](double x, double, double) { return std::exp(x); }},
    {UnaryOp::Log, [](double x, double, double) { return std::log(x); }, 0.1},
    {UnaryOp::Log1p, [](double x, double, double) { return std::log1p(x); }, 0.1},
    {UnaryOp::Sqrt, [](double x, double, double) { return std::sqrt(x); }, 0.1},
    {UnaryOp::Rsqrt, [](double x, double, double) { return 1 / std::sqrt(x); }, 0.1},
    {UnaryOp::Sin, [](double x, double, double) { return std::sin(x); }},
    {UnaryOp::Cos, [](double x, double, double) { return std::cos(x); }},
    {UnaryOp::Tanh, [](double x, double, double) { return std::tanh(x); }},
    {UnaryOp::Sigmoid, [](double x, double, double) { return sigmoid_ref(x); }},
    {UnaryOp::Relu, [](double x, double, double) { return x > 0 ? x : 0; }},
    {UnaryOp::Gelu, [](double x, double, double) { return gelu_ref(x); }},
    {UnaryOp::GeluTanh, [](double x, double, double) { return gelu_tanh_ref(x); }},
    {UnaryOp::Silu, [](double x, double, double) { return x * sigmoid_ref(x); }},
    {UnaryOp::Sign, [](double x, double, double) { return double((x > 0) - (x < 0)); }},
    {UnaryOp::LogicalNot, [](double x, double, double) { return double(x == 0); }},
    // Random inputs are finite; NaN and inf are tested in test_elementwise.cpp.
    {UnaryOp::IsFinite, [](double x, double, double) { return double(std::isfinite(x)); }},
    {UnaryOp::IsNan, [](double x, double, double) { return double(std::isnan(x)); }},
    {UnaryOp::IsInf, [](double x, double, double) { return double(std::isinf(x)); }},
    {UnaryOp::Clamp, [](double x, double lo, double hi) { return std::min(std::max(x, lo), hi); },
     -2.0, 2.0, -0.5, 0.7},
    {UnaryOp::NanToNum, [](double x, double, double) { return x; }, -2.0, 2.0, 0.25, 100},
    {UnaryOp::PowScalar, [](double x, double p, double) { return std::pow(x, p); }, -2.0, 2.0, 3},
    {UnaryOp::AddScalar, [](double x, double c, double) { return x + c; }, -2.0, 2.0, 1.5},
    {UnaryOp::MulScalar, [](double x, double c, double) { return x * c; }, -2.0, 2.0, -2},
};

// Fused backward formulas: a is the incoming gradient, b the saved tensor (see BinaryOp).
inline constexpr BinaryOpCase kBinaryOpCases[] = {
    {BinaryOp::Add, [](double a, double b, double alpha) { return a + alpha * b; }},
    {BinaryOp::Sub, [](double a, double b, double alpha) { return a - alpha * b; }},
    {BinaryOp::Mul, [](double a, double b, double) { return a * b; }},
    {BinaryOp::Div, [](double a, double b, double) { return a / b; }},
    {BinaryOp::Pow, [](double a, double b, double) { return std::pow(a, b); }, 0.1},
    {BinaryOp::Maximum, [](double a, double b, double) { return std::max(a, b); }},
    {BinaryOp::Minimum, [](double a, double b, double) { return std::min(a, b); }},
    {BinaryOp::Eq, [](double a, double b, double) { return double(a == b); }},
    {BinaryOp::Ne, [](double a, double b, double) { return double(a != b); }},
    {BinaryOp::Lt, [](double a, double b, double) { return double(a < b); }},
    {BinaryOp::Le, [](double a, double b, double) { return double(a <= b); }},
    {BinaryOp::Gt, [](double a, double b, double) { return double(a > b); }},
    {BinaryOp::Ge, [](double a, double b, double) { return double(a >= b); }},
    {BinaryOp::TanhBackward, [](double a, double b, double) { return a * (1 - b * b); }},
    {BinaryOp::SigmoidBackward, [](double a, double b, double) { return a * b * (1 - b); }},
    {BinaryOp::ReluBackward, [](double a, double b, double) { return b > 0 ? a : 0; }},
    {BinaryOp::GeluBackward, [](double a, double b, double) { return a * d_gelu_ref(b); }},
    {BinaryOp::GeluTanhBackward, [](double a, double b, double) { return a * d_gelu_tanh_ref(b); }},
    {BinaryOp::SiluBackward, [](double a, double b, double) { return a * d_silu_ref(b); }},
};

static_assert(std::size(kUnaryOpCases) == size_t(UnaryOp::kCount), "every unary op needs a test row");
static_assert(std::size(kBinaryOpCases) == size_t(BinaryOp::kCount), "every binary op needs a test row");
static_assert(kernels::misplaced_row(kUnaryOpCases) == -1, "row i of kUnaryOpCases must test UnaryOp(i)");
static_assert(kernels::misplaced_row(kBinaryOpCases) == -1, "row i of kBinaryOpCases must test BinaryOp(i)");

// "gelu (UnaryOp 13)": the op's name and its enumerator, which also tells gelu's two forms apart.
template <typename Op>
std::string op_label(Op op) {
  return std::string(kernels::op_info(op).name) + " (" + kernels::kEnumName<Op> + " " + std::to_string(int(op)) +
         ")";
}

}  // namespace loom::test
