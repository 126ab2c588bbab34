// Typed exceptions and the checking macros.
//
// Note [two tiers of checks]
// LOOM_CHECK(cond, ErrorType, msg...) is for user errors: it throws ErrorType with a
// message that names the op and the offending shapes/dtypes/devices. LOOM_ASSERT(cond,
// msg...) is for internal invariants and throws InternalError. Neither is ever
// compiled out: a wrong shape must give a clear error, never a crash.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ShapeError : public Error { using Error::Error; };        // incompatible sizes
class DTypeError : public Error { using Error::Error; };        // wrong or mismatched dtype
class DeviceError : public Error { using Error::Error; };       // wrong device, no CUDA
class IndexError : public Error { using Error::Error; };        // index out of range
class ValueError : public Error { using Error::Error; };        // bad argument value
class AutogradError : public Error { using Error::Error; };     // misuse of autograd
class NotImplementedError : public Error { using Error::Error; };
class SerializationError : public Error { using Error::Error; };  // a bad or unreadable file
class DataError : public Error { using Error::Error; };           // a malformed dataset record (file:line)
class TimeoutError : public Error { using Error::Error; };        // a wait that ran past its limit
class OutOfMemoryError : public Error { using Error::Error; };    // a device allocation failed
class CaptureError : public Error { using Error::Error; };        // what a CUDA graph capture cannot record
class InternalError : public Error { using Error::Error; };      // a Loom bug

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}
}  // namespace detail

}  // namespace loom

#define LOOM_CHECK(cond, ErrorType, ...)                    \
  do {                                                      \
    if (!(cond)) [[unlikely]] {                             \
      throw ErrorType(::loom::detail::str(__VA_ARGS__));    \
    }                                                       \
  } while (0)

#define LOOM_ASSERT(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond)) [[unlikely]] {                                                       \
      throw ::loom::InternalError(::loom::detail::str(                                \
          "internal assert failed: " #cond " at " __FILE__ ":", __LINE__, " ", ##__VA_ARGS__)); \
    }                                                                                 \
  } while (0)
