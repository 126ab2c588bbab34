// Shared test helpers: the per-dtype tolerance table, random non-zero data, comparison
// against plain-loop references, and the messages of thrown exceptions.
#pragma once

#include "catch2_compat.h"

#include <fcntl.h>     // open (releasing a FIFO)
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>  // mkfifo
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loom.h"

namespace loom::test {

struct Tolerance {
  double rtol, atol;
};

// One table for the whole suite: how close a kernel's result must be to a float64
// reference computed by a plain loop.
inline Tolerance tolerance(DType t) {
  switch (t) {
    case DType::Float64: return {1e-10, 1e-12};
    case DType::Float32: return {1e-5, 1e-6};
    case DType::Float16: return {2e-3, 1e-3};
    case DType::BFloat16: return {1.6e-2, 1e-2};
    default: return {0.0, 0.0};  // integers and bool: exact
  }
}

// Uniform values in [low, high] with |x| >= 0.1 (no zeros), in dtype.
inline Tensor random_nonzero(const Shape& shape, DType dtype = kFloat32, double low = -2.0,
                             double high = 2.0) {
  Tensor u = rand(shape, kFloat64) * (high - low) + low;
  Tensor away = where(u.abs() < 0.1, u.sign() * 0.1 + (u.eq(0)).to(kFloat64) * 0.1, u);
  if (is_floating_point(dtype)) return away.to(dtype);
  return away.clamp(low, high).to(kInt64).masked_fill(away.to(kInt64).eq(0), 1).to(dtype);
}

// Values of t rounded through dtype (so a reference sees the same inputs the kernel saw).
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Whether a and b (on the CPU) have the same shape, dtype and bytes: bit-identical.
inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data(), cb.data(), size_t(ca.nbytes())) == 0;
}

// Checks actual against expected (same element order), with dtype's tolerance.
inline void check_close(const Tensor& actual, const std::vector<double>& expected, DType dtype,
                        const std::string& what = "") {
  Tolerance tol = tolerance(dtype);
  std::vector<double> a = actual.to_vector<double>();
  REQUIRE(a.size() == expected.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(expected[i]);
    const bool same_inf = std::isinf(a[i]) && a[i] == expected[i];
    if (both_nan || same_inf) continue;
    if (std::abs(a[i] - expected[i]) > tol.atol + tol.rtol * std::abs(expected[i])) {
      std::ostringstream os;
      os << what << " element " << i << ": got " << a[i] << ", expected " << expected[i] << " ("
         << dtype_name(dtype) << ")";
      FAIL(os.str());
    }
  }
}

inline void check_close(const Tensor& actual, const Tensor& expected, const std::string& what = "") {
  REQUIRE(actual.sizes() == expected.sizes());
  check_close(actual, expected.to_vector<double>(), actual.dtype(), what);
}

// Requires that f throws E and that the message contains every string in `parts`.
template <typename E>
void require_throws_with(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const E& e) {
    std::string msg = e.what();
    for (const std::string& p : parts) {
      INFO("message: " << msg);
      CHECK(msg.find(p) != std::string::npos);
    }
    return;
  } catch (const std::exception& e) {
    FAIL("threw the wrong exception type: " << e.what());
  }
  FAIL("did not throw");
}

// Makes a FIFO at path (nobody writes to it) and returns path.
inline std::string make_fifo(const std::string& path) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

// As require_throws_with, for a loader given the FIFO `fifo` (or a path through it): f
// must throw within seconds. If it blocks, the FIFO is opened for writing to release it
// and the test fails, so that a blocking loader fails the suite instead of hanging it.
template <typename E>
void require_throws_without_blocking(const std::function<void()>& f, const std::string& fifo,
                                     const std::vector<std::string>& parts) {
  auto result = std::async(std::launch::async, [&f]() -> std::exception_ptr {
    try {
      f();
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // succeeds once a reader waits
      if (fd >= 0) ::close(fd);
    }
    result.get();
    FAIL("blocked on the FIFO " << fifo << " for 10 s");
  }
  const std::exception_ptr thrown = result.get();
  require_throws_with<E>([&] { if (thrown) std::rethrow_exception(thrown); }, parts);
}

// The message of the exception fn throws as E (fails the test if it throws nothing).
template <typename E, typename Fn>
std::string message_of(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return "";
}

// The golden fixture tests/golden/data/<name>.safetensors, generated from PyTorch by the
// scripts in tests/golden/; read once per process.
inline const SafetensorsFile& golden_file(const std::string& name) {
  static std::map<std::string, SafetensorsFile> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, load_safetensors(std::string(LOOM_TEST_DATA_DIR) + "/" + name + ".safetensors")).first;
  return it->second;
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v{kFloat32, kFloat64, kFloat16, kBFloat16};
  return v;
}

// A float64 leaf requiring grad with random non-zero values.
inline Tensor leaf(const Shape& shape, double low = -2.0, double high = 2.0) {
  return random_nonzero(shape, kFloat64, low, high).requires_grad_(true);
}

// A scratch directory for one test case, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loom-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes bytes to path/name (creating folders on the way) and returns the file's path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::filesystem::path f = path / name;
    std::filesystem::create_directories(f.parent_path());
    std::ofstream(f, std::ios::binary) << bytes;
    return f.string();
  }
  std::vector<std::string> names() const {  // what the directory holds, sorted
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::filesystem::path path;
};

}  // namespace loom::test
