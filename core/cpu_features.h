// The x86 features that decide which code runs: the GEMM and vector-math builds of
// kernels/cpu (gemm.h, gemm_bf16.h), CRC-32C's crc32 instruction (train/tensorboard), and what
// loom-cpu-info reports (kernels/cpu/gemm_report.h). Header-only, so the benchmarks that do
// not link Loom (bench/fma_peak.h) read them the same way.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace loom {

// A feature is on when CPUID has it and, for AVX, AVX-512 and AMX, the OS saves its
// registers (XCR0), as __builtin_cpu_supports and Linux's /proc/cpuinfo flags have it. Using
// the AMX tiles also needs Linux's permission, which cpu_has_amx_bf16 (gemm_bf16.h) asks for.
struct CpuFeatures {
  bool sse42 = false, fma = false, avx2 = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_bf16 = false, avx512_fp16 = false;
  bool amx_bf16 = false, amx_tile = false;
};

namespace detail {

inline CpuFeatures read_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  f.sse42 = ecx & (1u << 20);
  const bool fma = ecx & (1u << 12);
  // XCR0: which register state the OS saves (readable only where OSXSAVE says it set it).
  unsigned xcr0 = 0;
  if (ecx & (1u << 27)) {
    unsigned xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  }
  const bool os_avx = (xcr0 & 0x6) == 0x6;         // XMM and YMM
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;    // and opmask, ZMM0-15's upper halves, ZMM16-31
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  f.fma = os_avx && fma;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned max_subleaf = eax;
  f.avx2 = os_avx && (ebx & (1u << 5));
  f.avx512f = os_avx512 && (ebx & (1u << 16));
  f.avx512dq = os_avx512 && (ebx & (1u << 17));
  f.avx512bw = os_avx512 && (ebx & (1u << 30));
  f.avx512vl = os_avx512 && (ebx & (1u << 31));
  f.amx_bf16 = os_amx && (edx & (1u << 22));
  f.avx512_fp16 = os_avx512 && (edx & (1u << 23));
  f.amx_tile = os_amx && (edx & (1u << 24));
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
    f.avx512_bf16 = os_avx512 && (eax & (1u << 5));
#endif
  return f;
}

}  // namespace detail

// This CPU's features (read once).
inline const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detail::read_cpu_features();
  return f;
}

}  // namespace loom
