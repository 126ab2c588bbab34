// Element types, their names and sizes, and the dispatch from a runtime DType to a
// compile-time C++ type.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"

namespace loom {

enum class DType : int8_t { Float32, Float64, Float16, BFloat16, Int64, Int32, Bool };

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kFloat16 = DType::Float16;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kInt64 = DType::Int64;
constexpr DType kInt32 = DType::Int32;
constexpr DType kBool = DType::Bool;

constexpr int64_t element_size(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Int64: return 8;
    case DType::Float32:
    case DType::Int32: return 4;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr bool is_floating_point(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 ||
         t == DType::BFloat16;
}
constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::Int64 || t == DType::Int32 || (include_bool && t == DType::Bool);
}

// PyTorch's spelling, used in every error message: "float32", "int64", ...
const char* dtype_name(DType t);
std::ostream& operator<<(std::ostream& os, DType t);
// Parses "float32", "float", "f32", "bf16", ...; throws DTypeError otherwise.
DType dtype_from_name(const std::string& name);

// Type promotion for binary ops, as PyTorch's promote_types: bool < ints < floats, and
// float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);

template <typename T> struct CppTypeToDType;
template <> struct CppTypeToDType<float> { static constexpr DType value = DType::Float32; };
template <> struct CppTypeToDType<double> { static constexpr DType value = DType::Float64; };
template <> struct CppTypeToDType<Half> { static constexpr DType value = DType::Float16; };
template <> struct CppTypeToDType<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct CppTypeToDType<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct CppTypeToDType<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct CppTypeToDType<bool> { static constexpr DType value = DType::Bool; };
template <typename T>
constexpr DType dtype_of = CppTypeToDType<std::remove_cv_t<T>>::value;

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise.
template <typename T> struct OpMathType { using type = T; };
template <> struct OpMathType<Half> { using type = float; };
template <> struct OpMathType<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMathType<T>::type;

template <typename T>
constexpr bool is_floating_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                               std::is_same_v<T, BFloat16>;

// Dispatch: calls fn.template operator()<T>() with T the C++ type of `t`.
//   dispatch_all(x.dtype(), "exp", [&]<typename T>() { ... });
// The op name goes into the error when the dtype is not in the set.
#define LOOM_DISPATCH_CASE(enum_value, cpp_type) \
  case DType::enum_value: return fn.template operator()<cpp_type>();

template <typename F>
decltype(auto) dispatch_all(DType t, const char* op, F&& fn) {
  switch (t) {
    LOOM_DISPATCH_CASE(Float32, float)
    LOOM_DISPATCH_CASE(Float64, double)
    LOOM_DISPATCH_CASE(Float16, Half)
    LOOM_DISPATCH_CASE(BFloat16, BFloat16)
    LOOM_DISPATCH_CASE(Int64, int64_t)
    LOOM_DISPATCH_CASE(Int32, int32_t)
    LOOM_DISPATCH_CASE(Bool, bool)
  }
  throw DTypeError(detail::str(op, ": unknown dtype"));
}

// Numeric types (no bool).
template <typename F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& fn) {
  switch (t) {
    LOOM_DISPATCH_CASE(Float32, float)
    LOOM_DISPATCH_CASE(Float64, double)
    LOOM_DISPATCH_CASE(Float16, Half)
    LOOM_DISPATCH_CASE(BFloat16, BFloat16)
    LOOM_DISPATCH_CASE(Int64, int64_t)
    LOOM_DISPATCH_CASE(Int32, int32_t)
    default: break;
  }
  throw DTypeError(detail::str(op, ": expected a numeric dtype, got ", dtype_name(t)));
}

// Floating types only.
template <typename F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& fn) {
  switch (t) {
    LOOM_DISPATCH_CASE(Float32, float)
    LOOM_DISPATCH_CASE(Float64, double)
    LOOM_DISPATCH_CASE(Float16, Half)
    LOOM_DISPATCH_CASE(BFloat16, BFloat16)
    default: break;
  }
  throw DTypeError(detail::str(op, ": expected a floating-point dtype, got ", dtype_name(t)));
}

// Index types (int64, int32).
template <typename F>
decltype(auto) dispatch_index(DType t, const char* op, F&& fn) {
  switch (t) {
    LOOM_DISPATCH_CASE(Int64, int64_t)
    LOOM_DISPATCH_CASE(Int32, int32_t)
    default: break;
  }
  throw DTypeError(detail::str(op, ": expected an index tensor of dtype int64 or int32, got ",
                               dtype_name(t)));
}

#undef LOOM_DISPATCH_CASE

}  // namespace loom
