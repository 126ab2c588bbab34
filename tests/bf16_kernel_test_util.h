// Tests of the bfloat16 GEMM kernels (kernels/cpu/gemm_bf16.h): forcing one for a scope,
// and skipping a test (exit 77, CTest's "Skipped") on a CPU that cannot run the
// avx512_bf16 kernel. Such tests are tagged "[.avx512bf16]" and registered on their own
// (CMakeLists.txt), so a skip is never counted as a pass.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "kernels/cpu/gemm_bf16.h"

namespace loom::test {

struct ForcedBf16Kernel {
  explicit ForcedBf16Kernel(kernels::cpu::Bf16GemmKernel k) { kernels::cpu::force_bf16_gemm_kernel(k); }
  ~ForcedBf16Kernel() { kernels::cpu::force_bf16_gemm_kernel(std::nullopt); }
  ForcedBf16Kernel(const ForcedBf16Kernel&) = delete;
  ForcedBf16Kernel& operator=(const ForcedBf16Kernel&) = delete;
};

inline void skip_without_avx512_bf16() {
  if (kernels::cpu::cpu_has_avx512_bf16()) return;
  std::printf("SKIPPED: this CPU has no AVX512-BF16\n");
  std::fflush(stdout);
  std::exit(77);
}

}  // namespace loom::test
