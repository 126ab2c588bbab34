// The environment switches that force a CPU GEMM (read once, at first use):
//   LOOM_CPU_BF16_GEMM=onednn|avx512_bf16|float32  the bfloat16 GEMM's kernel (gemm_bf16.h)
//   LOOM_CPU_FLOAT_GEMM=onednn|eigen               the float32 GEMM (float_gemm in gemm.h)
// Unset or empty: the CPU's choice. A test's force_* call overrides either.
#pragma once

#include <optional>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"

namespace loom::kernels::cpu {

inline constexpr const char* kBf16GemmEnv = "LOOM_CPU_BF16_GEMM";
inline constexpr const char* kFloatGemmEnv = "LOOM_CPU_FLOAT_GEMM";

// A variable's value (nullptr: unset) as a choice; nullopt for unset or empty. Throws
// loom::ValueError naming the variable, the value and the choices for any other value.
// (Availability on this CPU is checked by the caller, bf16_gemm_kernel.)
std::optional<Bf16GemmKernel> parse_bf16_gemm_env(const char* value);
std::optional<FloatGemm> parse_float_gemm_env(const char* value);

}  // namespace loom::kernels::cpu
