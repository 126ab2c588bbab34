#include "core/dtype.h"

#include <algorithm>
#include <cctype>

namespace loom {

const char* dtype_name(DType t) {
#define LOOM_DTYPE_NAME(name, cpp, str, size, kind) \
  case DType::name: return str;
  switch (t) { LOOM_FORALL_DTYPES(LOOM_DTYPE_NAME) }
#undef LOOM_DTYPE_NAME
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

DType dtype_from_name(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "float32" || s == "float" || s == "f32") return DType::Float32;
  if (s == "float64" || s == "double" || s == "f64") return DType::Float64;
  if (s == "float16" || s == "half" || s == "f16") return DType::Float16;
  if (s == "bfloat16" || s == "bf16") return DType::BFloat16;
  if (s == "int64" || s == "long" || s == "i64") return DType::Int64;
  if (s == "int32" || s == "int" || s == "i32") return DType::Int32;
  if (s == "bool") return DType::Bool;
  throw DTypeError("dtype_from_name: unknown dtype name '" + name + "'");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool: return 0;
      case DType::Int32: return 1;
      case DType::Int64: return 2;
      case DType::Float16:
      case DType::BFloat16: return 3;
      case DType::Float32: return 4;
      case DType::Float64: return 5;
    }
    return 0;
  };
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace loom
