// CUDA tests: tagged "[.cuda]" (hidden from a plain `loom_tests` run; `loom_tests "[cuda]"`
// runs them) and registered with CTest separately, with SKIP_RETURN_CODE 77 (see
// CMakeLists.txt). Each starts with LOOM_SKIP_WITHOUT_CUDA(): without a usable GPU it
// prints why and exits the process with 77, which CTest reports as "Skipped", never as
// passed. Run by hand, `loom_tests "[cuda]"` likewise stops at the first one with 77.
#pragma once

#include "catch2_compat.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/build_info.h"
#include "core/cuda.h"
#include "core/factories.h"
#include "kernels/kernels.h"

namespace loom::test {

[[noreturn]] inline void skip_cuda_test() {
  std::printf("SKIPPED: %s\n", built_with_cuda() ? "no usable CUDA device on this machine"
                                                 : "Loom was built without CUDA");
  std::fflush(stdout);
  std::exit(77);
}

// A GPU output inside a buffer of sentinels, kPad elements either side, the output itself
// poisoned (NaN, or a large negative integer): an element a kernel misses, or a write out of
// bounds, fails the test.
struct Guarded {
  static constexpr int64_t kPad = 64;
  static constexpr double kSentinel = -4096;  // exact in every dtype
  Tensor buffer;  // (kPad + numel + kPad)
  Tensor out;     // the output: a contiguous view of the buffer's middle
};

inline Guarded guarded(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor buffer = empty({n + 2 * Guarded::kPad}, TensorOptions(dtype).device(kCUDA));
  kernels::fill(buffer, Scalar(Guarded::kSentinel));
  Tensor out = buffer.slice(0, Guarded::kPad, Guarded::kPad + n).view(shape);
  kernels::fill(out, is_floating_point(dtype) ? Scalar(std::numeric_limits<double>::quiet_NaN()) : Scalar(-123456789));
  return {buffer, out};
}

// Fails unless every sentinel is as written.
inline void check_sentinels(const Guarded& g, const std::string& what) {
  const std::vector<double> v = g.buffer.cpu().to_vector<double>();
  const double sentinel = full({1}, Guarded::kSentinel, TensorOptions(g.buffer.dtype())).to_vector<double>()[0];
  const int64_t n = int64_t(v.size());
  for (int64_t i = 0; i < n; ++i) {
    if (i >= Guarded::kPad && i < n - Guarded::kPad) continue;
    INFO(what << ": element " << i - Guarded::kPad << " outside the output (of " << n - 2 * Guarded::kPad
              << " elements) is " << v[size_t(i)]);
    REQUIRE(v[size_t(i)] == sentinel);
  }
}

// For tests of cuDNN's recurrent layers: a build without cuDNN runs the sweep kernels.
[[noreturn]] inline void skip_cudnn_test() {
  std::printf("SKIPPED: Loom was built without cuDNN (the recurrent layers run the sweep kernels)\n");
  std::fflush(stdout);
  std::exit(77);
}

}  // namespace loom::test

// (A build without CUDA skips even with the host-emulated device on: these test kernels.)
#define LOOM_SKIP_WITHOUT_CUDA()                                                     \
  do {                                                                               \
    if (!::loom::built_with_cuda() || !::loom::cuda::is_available())                 \
      ::loom::test::skip_cuda_test();                                                \
  } while (0)

// Skips (77) without a GPU, or when the GPU's recurrent layers do not run on cuDNN.
#define LOOM_SKIP_WITHOUT_CUDNN()                                                             \
  do {                                                                                        \
    LOOM_SKIP_WITHOUT_CUDA();                                                                 \
    if (!::loom::kernels::rnn_stack_supported(                                                \
            ::loom::zeros({2, 2, 2}, ::loom::TensorOptions().device(::loom::kCUDA))))         \
      ::loom::test::skip_cudnn_test();                                                        \
  } while (0)
