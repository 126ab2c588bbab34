// The x86 features that decide which GEMM kernels run (gemm.h, gemm_bf16.h), as CPUID
// reports them, for choosing a kernel and for the report of cpu_gemm_report.h.
#pragma once

namespace loom::kernels::cpu {

struct CpuFeatures {
  bool avx2 = false, avx512f = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_bf16 = false, amx_tile = false;
};

// CPUID leaf 7 (checked once). These are the CPU's bits: whether the OS lets a process use
// the AVX-512 and AMX state is checked where a kernel is picked (cpu_has_avx512 and
// friends in gemm.h, and oneDNN itself, which asks Linux for the AMX tile state).
const CpuFeatures& cpu_features();

// AMX with bfloat16 tiles (AMX-BF16 and AMX-TILE), where oneDNN runs
// brg:avx512_core_amx_bf16 (Note [bfloat16 GEMM] in gemm_bf16.h).
bool cpu_has_amx_bf16();

}  // namespace loom::kernels::cpu
