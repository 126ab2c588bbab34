// CUDA tests: tagged "[.cuda]" (hidden from a plain `loom_tests` run; `loom_tests "[cuda]"`
// runs them) and registered with CTest separately, with SKIP_RETURN_CODE 77 (see
// CMakeLists.txt). Each starts with LOOM_SKIP_WITHOUT_CUDA(): without a usable GPU it
// prints why and exits the process with 77, which CTest reports as "Skipped", never as
// passed. Run by hand, `loom_tests "[cuda]"` likewise stops at the first one with 77.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "core/build_info.h"
#include "core/cuda.h"

namespace loom::test {

[[noreturn]] inline void skip_cuda_test() {
  std::printf("SKIPPED: %s\n", built_with_cuda() ? "no usable CUDA device on this machine"
                                                 : "Loom was built without CUDA");
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
