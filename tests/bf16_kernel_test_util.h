// Tests of the bfloat16 GEMM kernels (kernels/cpu/gemm_bf16.h): forcing one for a scope,
// and skipping a test (exit 77, CTest's "Skipped") on a CPU that cannot run the
// avx512_bf16 kernel or oneDNN's bfloat16 primitive. Such tests are tagged "[.avx512bf16]"
// or "[.onednn_bf16]" and registered on their own (CMakeLists.txt), so a skip is never
// counted as a pass.
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

// The onednn kernel and oneDNN's bfloat16 matmul primitive (tagged "[.onednn_bf16]").
inline void skip_without_onednn_bf16() {
  if (kernels::cpu::onednn_matmul_available(DType::BFloat16)) return;
  std::printf("SKIPPED: oneDNN 2.6 has no bf16 primitive on this CPU (needs AVX-512)\n");
  std::fflush(stdout);
  std::exit(77);
}

}  // namespace loom::test
