#include "kernels/cpu/gemm_env.h"

#include <string_view>

#include "core/error.h"

namespace loom::kernels::cpu {

std::optional<Bf16GemmKernel> parse_bf16_gemm_env(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  for (Bf16GemmKernel k : {Bf16GemmKernel::OneDnn, Bf16GemmKernel::Avx512Bf16, Bf16GemmKernel::Float32})
    if (std::string_view(value) == bf16_gemm_kernel_name(k)) return k;
  LOOM_CHECK(false, ValueError, kBf16GemmEnv, "=", value, " is not a bfloat16 GEMM kernel: the choices are onednn, ",
             "avx512_bf16 and float32 (or unset, for the CPU's choice)");
  return std::nullopt;
}

std::optional<FloatGemm> parse_float_gemm_env(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  for (FloatGemm g : {FloatGemm::OneDnn, FloatGemm::Eigen})
    if (std::string_view(value) == float_gemm_name(g)) return g;
  LOOM_CHECK(false, ValueError, kFloatGemmEnv, "=", value, " is not a float32 GEMM: the choices are onednn and ",
             "eigen (or unset, for the default, onednn)");
  return std::nullopt;
}

}  // namespace loom::kernels::cpu
