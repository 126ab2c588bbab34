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

// The dtype table: every dtype once, with its C++ type, PyTorch's name, its size in bytes and
// its kind. A new dtype joins here (and in promote_types' order, the safetensors codes and
// the backends that compute with it); the dispatches below take it only at the call sites
// that ask for it by name (dispatch_all_and<...>), as PyTorch's AT_DISPATCH_ALL_TYPES_AND.
#define LOOM_FORALL_DTYPES(X)                      \
  X(Float32, float, "float32", 4, Floating)        \
  X(Float64, double, "float64", 8, Floating)       \
  X(Float16, Half, "float16", 2, Floating)         \
  X(BFloat16, BFloat16, "bfloat16", 2, Floating)   \
  X(Int64, int64_t, "int64", 8, Integral)          \
  X(Int32, int32_t, "int32", 4, Integral)          \
  X(Bool, bool, "bool", 1, Boolean)

#define LOOM_DTYPE_ENUM(name, cpp, str, size, kind) name,
enum class DType : int8_t { LOOM_FORALL_DTYPES(LOOM_DTYPE_ENUM) };
#undef LOOM_DTYPE_ENUM

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kFloat16 = DType::Float16;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kInt64 = DType::Int64;
constexpr DType kInt32 = DType::Int32;
constexpr DType kBool = DType::Bool;

enum class DTypeKind : int8_t { Floating, Integral, Boolean };

constexpr int64_t element_size(DType t) {
#define LOOM_DTYPE_SIZE(name, cpp, str, size, kind) \
  case DType::name: return size;
  switch (t) { LOOM_FORALL_DTYPES(LOOM_DTYPE_SIZE) }
#undef LOOM_DTYPE_SIZE
  return 0;
}

constexpr DTypeKind dtype_kind(DType t) {
#define LOOM_DTYPE_KIND(name, cpp, str, size, kind) \
  case DType::name: return DTypeKind::kind;
  switch (t) { LOOM_FORALL_DTYPES(LOOM_DTYPE_KIND) }
#undef LOOM_DTYPE_KIND
  return DTypeKind::Boolean;
}

constexpr bool is_floating_point(DType t) { return dtype_kind(t) == DTypeKind::Floating; }
constexpr bool is_integral(DType t, bool include_bool = false) {
  return dtype_kind(t) == DTypeKind::Integral || (include_bool && t == DType::Bool);
}

// PyTorch's spelling, used in every error message: "float32", "int64", ...
const char* dtype_name(DType t);
std::ostream& operator<<(std::ostream& os, DType t);
// Parses "float32", "float", "f32", "bf16", ...; throws DTypeError otherwise.
DType dtype_from_name(const std::string& name);

// Type promotion for binary ops, as PyTorch's promote_types: bool < ints < floats, and
// float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);

// The C++ type of a dtype and back: cpp_type_t<kFloat32> is float, dtype_of<float> kFloat32.
template <DType D> struct DTypeToCppType;
template <typename T> struct CppTypeToDType;
#define LOOM_DTYPE_TYPES(name, cpp, str, size, kind)                              \
  template <> struct DTypeToCppType<DType::name> { using type = cpp; };           \
  template <> struct CppTypeToDType<cpp> { static constexpr DType value = DType::name; };
LOOM_FORALL_DTYPES(LOOM_DTYPE_TYPES)
#undef LOOM_DTYPE_TYPES
template <DType D>
using cpp_type_t = typename DTypeToCppType<D>::type;
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
// The op name goes into the error when the dtype is not in the set. Each form is a set of
// dtypes (dispatch_among<...>); dispatch_all_and<extra...> is "all, plus these", for the
// call sites that take a dtype outside the standard seven.
namespace detail {
template <DType D, DType... Rest, typename F, typename Fail>
decltype(auto) dispatch_among(DType t, F&& fn, const Fail& fail) {
  if (t == D) return fn.template operator()<cpp_type_t<D>>();
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_among<Rest...>(t, std::forward<F>(fn), fail);
  } else {
    fail();  // [[noreturn]]: throws
    return fn.template operator()<cpp_type_t<D>>();  // never reached; gives the return type
  }
}
}  // namespace detail

// Every standard dtype, and the extras named.
template <DType... Extra, typename F>
decltype(auto) dispatch_all_and(DType t, const char* op, F&& fn) {
  return detail::dispatch_among<kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool, Extra...>(
      t, std::forward<F>(fn), [&] { throw DTypeError(detail::str(op, ": unknown dtype ", int(t))); });
}

template <typename F>
decltype(auto) dispatch_all(DType t, const char* op, F&& fn) {
  return dispatch_all_and<>(t, op, std::forward<F>(fn));
}

// Numeric types (no bool).
template <typename F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& fn) {
  return detail::dispatch_among<kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32>(
      t, std::forward<F>(fn),
      [&] { throw DTypeError(detail::str(op, ": expected a numeric dtype, got ", dtype_name(t))); });
}

// Floating types only.
template <typename F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& fn) {
  return detail::dispatch_among<kFloat32, kFloat64, kFloat16, kBFloat16>(
      t, std::forward<F>(fn),
      [&] { throw DTypeError(detail::str(op, ": expected a floating-point dtype, got ", dtype_name(t))); });
}

// Index types (int64, int32).
template <typename F>
decltype(auto) dispatch_index(DType t, const char* op, F&& fn) {
  return detail::dispatch_among<kInt64, kInt32>(t, std::forward<F>(fn), [&] {
    throw DTypeError(detail::str(op, ": expected an index tensor of dtype int64 or int32, got ", dtype_name(t)));
  });
}

}  // namespace loom
