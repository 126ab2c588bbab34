// The elementwise and reduction ops: their enums and one table row per op.
//
// Note [op tables]
// Every fact about an op that is not its math lives in one constexpr row: the name users
// see in error messages, the name of its backward node, what that node saves, the dtypes
// its kernel takes, and its autocast category. The kernels (kernels/cpu/, kernels/cuda/),
// the autograd functions (autograd/functions/) and the tests read the rows instead of
// restating them. The math stays where it is: the functors in kernels/math/functors.h and the
// backward formulas in autograd/functions/unary.cpp and binary.cpp.
//
// Each enum ends with kCount, and static_asserts below check that its table has kCount
// rows and that row i describes enumerator i, so a row added in the wrong place or
// forgotten does not compile. Adding a unary op therefore touches: this header (its
// enumerator and row), kernels/math/functors.h (its math), autograd/functions/unary.cpp (its
// backward formula and its Tensor method, declared in core/tensor.h), and the tests: its
// row in tests/elementwise_cases.h and a case in tests/test_elementwise.cpp for gradcheck.
//
// This header is plain data (no Tensor), so host and device code can both read it.
#pragma once

#include <cstddef>
#include <iterator>

#include "kernels/support/autocast_policy.h"

namespace loom::kernels {

enum class UnaryOp {
  Neg, Abs, Exp, Log, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, GeluTanh,
  Silu, Sign, LogicalNot,
  IsFinite, IsNan, IsInf,  // output bool
  Clamp,      // arg0 = min (or -inf), arg1 = max (or +inf)
  NanToNum,   // NaN -> arg0, +inf -> arg1, -inf -> arg2
  PowScalar,  // x ^ arg0
  AddScalar,  // x + arg0
  MulScalar,  // x * arg0
  kCount
};

enum class BinaryOp {
  Add,  // a + alpha * b
  Sub,  // a - alpha * b
  Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,  // output bool
  // Fused backward formulas: a = incoming gradient, b = the saved tensor named.
  TanhBackward,     // b = tanh output: a * (1 - b^2)
  SigmoidBackward,  // b = sigmoid output: a * b * (1 - b)
  ReluBackward,     // b = relu input or output: b > 0 ? a : 0
  GeluBackward,     // b = gelu input (erf form)
  GeluTanhBackward, // b = gelu input (tanh form)
  SiluBackward,     // b = silu input
  kCount
};

enum class ReduceOp { Sum, Mean, Max, Min, Prod, kCount };

// The dtypes an op's kernel takes.
enum class OpDTypes : unsigned char {
  Floating,   // floating dtypes only: the CUDA kernels are not compiled for others, and the
              // autograd layer converts integer inputs of unary ops to float32 (as PyTorch)
  Numeric,    // floating and integer dtypes, not bool
  All,        // every dtype: add and maximum of bools are "or", mul and minimum "and";
              // the unary ops return a bool input unchanged
  AllToBool,  // every dtype, and the output is bool (logical_not, comparisons)
};

// The `autocast` column: what autocast does to the op's inputs on each device (Note
// [autocast policy], kernels/support/autocast_policy.h). From PyTorch's lists, the ones that name
// elementwise ops: on CUDA exp, log, log1p, rsqrt, pow and sum run in float32 (sqrt, tanh,
// sigmoid and the rest are not listed); on the CPU only prod does.

// What a unary op's backward node saves: its input x, its output y, neither or both.
enum class Saves : unsigned char { None, Input, Output, Both };

// When a binary op's backward node saves one of a, b and out. A tensor is saved only when
// a gradient that will be computed reads it (as PyTorch), so that an in-place change to
// anything else, e.g. x in x + y, is not reported as an error at backward.
enum class SaveIf : unsigned char {
  Never,
  Always,
  ANeedsGrad,  // a requires grad
  BNeedsGrad,  // b requires grad
};
struct BinarySaves {
  SaveIf a, b, out;
};

struct UnaryOpInfo {
  UnaryOp op;
  const char* name;           // as users call it, and as error messages name it
  const char* backward_name;  // the backward node's name; nullptr: not differentiable
  OpDTypes dtypes;
  AutocastPolicy autocast;
  Saves saves;
};

struct BinaryOpInfo {
  BinaryOp op;
  const char* name;
  const char* backward_name;  // nullptr: not differentiable (comparisons, fused backward formulas)
  OpDTypes dtypes;
  AutocastPolicy autocast;
  BinarySaves saves;
};

// No saves column: what a reduction's node keeps depends on the entry point (max over all
// elements keeps the input and the result, max along a dim the input and the indices).
// The kernels take no bool (the autograd layer converts it); integer means are the
// kernels' business only, Tensor::mean rejects integers (as PyTorch).
struct ReduceOpInfo {
  ReduceOp op;
  const char* name;
  const char* backward_name;  // nullptr: no differentiable entry point yet
  OpDTypes dtypes;
  AutocastPolicy autocast;
};

inline constexpr UnaryOpInfo kUnaryOps[] = {
    // op                 name           backward node      dtypes               autocast              saves
    {UnaryOp::Neg,        "neg",         "NegBackward",     OpDTypes::Numeric,   kNoCast,              Saves::None},
    {UnaryOp::Abs,        "abs",         "AbsBackward",     OpDTypes::All,       kNoCast,              Saves::Input},
    {UnaryOp::Exp,        "exp",         "ExpBackward",     OpDTypes::Floating,  kCastToFloat32OnCuda, Saves::Output},
    {UnaryOp::Log,        "log",         "LogBackward",     OpDTypes::Floating,  kCastToFloat32OnCuda, Saves::Input},
    {UnaryOp::Log1p,      "log1p",       "Log1pBackward",   OpDTypes::Floating,  kCastToFloat32OnCuda, Saves::Input},
    {UnaryOp::Sqrt,       "sqrt",        "SqrtBackward",    OpDTypes::Floating,  kNoCast,              Saves::Output},
    {UnaryOp::Rsqrt,      "rsqrt",       "RsqrtBackward",   OpDTypes::Floating,  kCastToFloat32OnCuda, Saves::Output},
    {UnaryOp::Sin,        "sin",         "SinBackward",     OpDTypes::Floating,  kNoCast,              Saves::Input},
    {UnaryOp::Cos,        "cos",         "CosBackward",     OpDTypes::Floating,  kNoCast,              Saves::Input},
    {UnaryOp::Tanh,       "tanh",        "TanhBackward",    OpDTypes::Floating,  kNoCast,              Saves::Output},
    {UnaryOp::Sigmoid,    "sigmoid",     "SigmoidBackward", OpDTypes::Floating,  kNoCast,              Saves::Output},
    {UnaryOp::Relu,       "relu",        "ReluBackward",    OpDTypes::All,       kNoCast,              Saves::Output},
    {UnaryOp::Gelu,       "gelu",        "GeluBackward",    OpDTypes::Floating,  kNoCast,              Saves::Input},
    // gelu(approximate = "tanh") in PyTorch: one user-facing op, so the same names.
    {UnaryOp::GeluTanh,   "gelu",        "GeluBackward",    OpDTypes::Floating,  kNoCast,              Saves::Input},
    {UnaryOp::Silu,       "silu",        "SiluBackward",    OpDTypes::Floating,  kNoCast,              Saves::Input},
    {UnaryOp::Sign,       "sign",        nullptr,           OpDTypes::All,       kNoCast,              Saves::None},
    {UnaryOp::LogicalNot, "logical_not", nullptr,           OpDTypes::AllToBool, kNoCast,              Saves::None},
    {UnaryOp::IsFinite,   "isfinite",    nullptr,           OpDTypes::AllToBool, kNoCast,              Saves::None},
    {UnaryOp::IsNan,      "isnan",       nullptr,           OpDTypes::AllToBool, kNoCast,              Saves::None},
    {UnaryOp::IsInf,      "isinf",       nullptr,           OpDTypes::AllToBool, kNoCast,              Saves::None},
    {UnaryOp::Clamp,      "clamp",       "ClampBackward",   OpDTypes::All,       kNoCast,              Saves::Input},
    // Integer inputs never reach the kernel: Tensor::nan_to_num returns a copy (as PyTorch).
    {UnaryOp::NanToNum,   "nan_to_num",  "NanToNumBackward", OpDTypes::Floating, kNoCast,              Saves::Input},
    {UnaryOp::PowScalar,  "pow",         "PowBackward",     OpDTypes::Numeric,   kCastToFloat32OnCuda, Saves::Input},
    // x + c and x * c: the Tensor API computes them as binary ops with a 0-dim tensor;
    // these kernels are for internal callers.
    {UnaryOp::AddScalar,  "add",         "AddBackward",     OpDTypes::All,       kNoCast,              Saves::None},
    {UnaryOp::MulScalar,  "mul",         "MulBackward",     OpDTypes::All,       kNoCast,              Saves::None},
};

// Binary rows are two lines each: what the backward saves of (a, b, out) comes second.
inline constexpr BinaryOpInfo kBinaryOps[] = {
    // op                        name                  backward node      dtypes               autocast
    //  saves a                  saves b               saves out
    {BinaryOp::Add,              "add",                "AddBackward",     OpDTypes::All,       kNoCast,
     {SaveIf::Never,             SaveIf::Never,        SaveIf::Never}},
    {BinaryOp::Sub,              "sub",                "SubBackward",     OpDTypes::Numeric,   kNoCast,
     {SaveIf::Never,             SaveIf::Never,        SaveIf::Never}},
    {BinaryOp::Mul,              "mul",                "MulBackward",     OpDTypes::All,       kNoCast,
     {SaveIf::BNeedsGrad,        SaveIf::ANeedsGrad,   SaveIf::Never}},  // ga = g * b, gb = g * a
    {BinaryOp::Div,              "div",                "DivBackward",     OpDTypes::Numeric,   kNoCast,
     {SaveIf::Never,             SaveIf::Always,       SaveIf::BNeedsGrad}},  // ga = g / b, gb = -g * out / b
    {BinaryOp::Pow,              "pow",                "PowBackward",     OpDTypes::Numeric,   kCastToFloat32OnCuda,
     {SaveIf::Always,            SaveIf::Always,       SaveIf::BNeedsGrad}},  // gb = g * out * log a
    {BinaryOp::Maximum,          "maximum",            "MaximumBackward", OpDTypes::All,       kNoCast,
     {SaveIf::Always,            SaveIf::Always,       SaveIf::Never}},
    {BinaryOp::Minimum,          "minimum",            "MinimumBackward", OpDTypes::All,       kNoCast,
     {SaveIf::Always,            SaveIf::Always,       SaveIf::Never}},
    {BinaryOp::Eq,               "eq",                 nullptr,           OpDTypes::AllToBool, kNoCast, {}},
    {BinaryOp::Ne,               "ne",                 nullptr,           OpDTypes::AllToBool, kNoCast, {}},
    {BinaryOp::Lt,               "lt",                 nullptr,           OpDTypes::AllToBool, kNoCast, {}},
    {BinaryOp::Le,               "le",                 nullptr,           OpDTypes::AllToBool, kNoCast, {}},
    {BinaryOp::Gt,               "gt",                 nullptr,           OpDTypes::AllToBool, kNoCast, {}},
    {BinaryOp::Ge,               "ge",                 nullptr,           OpDTypes::AllToBool, kNoCast, {}},
    // Called by the backward formulas of unary.cpp, which run with grad mode off.
    {BinaryOp::TanhBackward,     "tanh_backward",      nullptr,           OpDTypes::Floating,  kNoCast, {}},
    {BinaryOp::SigmoidBackward,  "sigmoid_backward",   nullptr,           OpDTypes::Floating,  kNoCast, {}},
    {BinaryOp::ReluBackward,     "relu_backward",      nullptr,           OpDTypes::Floating,  kNoCast, {}},
    {BinaryOp::GeluBackward,     "gelu_backward",      nullptr,           OpDTypes::Floating,  kNoCast, {}},
    {BinaryOp::GeluTanhBackward, "gelu_tanh_backward", nullptr,           OpDTypes::Floating,  kNoCast, {}},
    {BinaryOp::SiluBackward,     "silu_backward",      nullptr,           OpDTypes::Floating,  kNoCast, {}},
};

inline constexpr ReduceOpInfo kReduceOps[] = {
    // op            name    backward node   dtypes              autocast
    {ReduceOp::Sum,  "sum",  "SumBackward",  OpDTypes::Numeric,  kCastToFloat32OnCuda},
    {ReduceOp::Mean, "mean", "MeanBackward", OpDTypes::Numeric,  kNoCast},
    {ReduceOp::Max,  "max",  "MaxBackward",  OpDTypes::Numeric,  kNoCast},
    {ReduceOp::Min,  "min",  "MinBackward",  OpDTypes::Numeric,  kNoCast},
    {ReduceOp::Prod, "prod", nullptr,        OpDTypes::Numeric,  kCastToFloat32},
};

// The index of the first row that does not describe the enumerator of its index, or -1.
template <typename Row, size_t N>
constexpr int misplaced_row(const Row (&rows)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (size_t(rows[i].op) != i) return int(i);
  return -1;
}

static_assert(std::size(kUnaryOps) == size_t(UnaryOp::kCount), "kUnaryOps needs one row per UnaryOp");
static_assert(std::size(kBinaryOps) == size_t(BinaryOp::kCount), "kBinaryOps needs one row per BinaryOp");
static_assert(std::size(kReduceOps) == size_t(ReduceOp::kCount), "kReduceOps needs one row per ReduceOp");
static_assert(misplaced_row(kUnaryOps) == -1, "row i of kUnaryOps must describe UnaryOp(i)");
static_assert(misplaced_row(kBinaryOps) == -1, "row i of kBinaryOps must describe BinaryOp(i)");
static_assert(misplaced_row(kReduceOps) == -1, "row i of kReduceOps must describe ReduceOp(i)");

// The row of an op. op must be a valid enumerator (not kCount).
constexpr const UnaryOpInfo& op_info(UnaryOp op) { return kUnaryOps[size_t(op)]; }
constexpr const BinaryOpInfo& op_info(BinaryOp op) { return kBinaryOps[size_t(op)]; }
constexpr const ReduceOpInfo& op_info(ReduceOp op) { return kReduceOps[size_t(op)]; }

// The enum's name, for messages about a value outside its range (dispatch_enum).
template <typename E>
inline constexpr const char* kEnumName = "enum";
template <>
inline constexpr const char* kEnumName<UnaryOp> = "UnaryOp";
template <>
inline constexpr const char* kEnumName<BinaryOp> = "BinaryOp";
template <>
inline constexpr const char* kEnumName<ReduceOp> = "ReduceOp";

// Shorthands for the questions code asks of a row.
template <typename Op>
constexpr bool needs_float(Op op) { return op_info(op).dtypes == OpDTypes::Floating; }
template <typename Op>
constexpr bool outputs_bool(Op op) { return op_info(op).dtypes == OpDTypes::AllToBool; }
template <typename Op>
constexpr bool is_differentiable(Op op) { return op_info(op).backward_name != nullptr; }
constexpr bool is_comparison(BinaryOp op) { return outputs_bool(op); }

}  // namespace loom::kernels
