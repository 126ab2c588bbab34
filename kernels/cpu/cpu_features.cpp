#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace loom::kernels::cpu {

namespace {

CpuFeatures read_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned max_subleaf = eax;
  f.avx2 = ebx & (1u << 5);
  f.avx512f = ebx & (1u << 16);
  f.amx_bf16 = edx & (1u << 22);
  f.avx512_fp16 = edx & (1u << 23);
  f.amx_tile = edx & (1u << 24);
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx512_bf16 = eax & (1u << 5);
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = read_cpu_features();
  return f;
}

bool cpu_has_amx_bf16() { return cpu_features().amx_bf16 && cpu_features().amx_tile; }

}  // namespace loom::kernels::cpu
