// Which GEMM runs on this CPU, in words: the CPU's features and the kernel per dtype
// (printed by loom-info through tools/loom_cpu_info.cpp).
#pragma once

#include <string>

namespace loom::kernels::cpu {

// Lines like
//   cpu features: avx2 yes, avx512f no, avx512_bf16 no, avx512_fp16 no, amx_bf16 no, amx_tile no
//   float32 GEMM: onednn (oneDNN's sgemm)
//   bfloat16 GEMM: float32 (operands rounded to bfloat16, float32 GEMM)
//   oneDNN bfloat16 matmul: unavailable (oneDNN 2.6 needs AVX-512)
// Throws loom::ValueError where LOOM_CPU_BF16_GEMM or LOOM_CPU_FLOAT_GEMM is invalid.
std::string cpu_gemm_report();

}  // namespace loom::kernels::cpu
