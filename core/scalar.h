// A number passed to an op (a + 2, x.fill_(0.5)): kept as double or int64 until the op
// knows the tensor's dtype.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"

namespace loom {

class Scalar {
 public:
  Scalar() = default;
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : i_(int64_t(v)), is_int_(true) {}  // NOLINT: implicit like a number
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : d_(double(v)) {}  // NOLINT
  Scalar(bool v) : i_(v), is_int_(true), is_bool_(true) {}  // NOLINT
  Scalar(Half v) : d_(float(v)) {}  // NOLINT
  Scalar(BFloat16 v) : d_(float(v)) {}  // NOLINT

  bool is_integral() const { return is_int_; }
  bool is_bool() const { return is_bool_; }
  double to_double() const { return is_int_ ? double(i_) : d_; }
  // A double is truncated toward zero, as int64_t(d) would be; one that int64 cannot hold
  // (NaN, inf, 1e300) is a ValueError, since that conversion is undefined behaviour.
  int64_t to_int() const {
    if (is_int_) return i_;
    // -2^63 <= d_ < 2^63 (both exact in double), written so that NaN fails too.
    LOOM_CHECK(d_ >= -0x1p63 && d_ < 0x1p63, ValueError, "Scalar: ", d_,
               " does not fit in int64 (expected a finite value in [-2^63, 2^63))");
    return int64_t(d_);
  }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return is_int_ ? i_ != 0 : d_ != 0.0;
    else if constexpr (std::is_integral_v<T>) return T(to_int());
    else return T(to_double());
  }

 private:
  double d_ = 0.0;
  int64_t i_ = 0;
  bool is_int_ = false;
  bool is_bool_ = false;
};

}  // namespace loom
