#include "kernels/cpu/gemm_report.h"

#include <sstream>

#include "core/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/onednn_matmul.h"

namespace loom::kernels::cpu {

namespace {

const char* yes(bool b) { return b ? "yes" : "no"; }

const char* float_gemm_what(FloatGemm g) { return g == FloatGemm::OneDnn ? "oneDNN's sgemm" : "Eigen's GEMM"; }

const char* bf16_kernel_what(Bf16GemmKernel k) {
  switch (k) {
    case Bf16GemmKernel::OneDnn: return "oneDNN's matmul primitive, weights packed once";
    case Bf16GemmKernel::Avx512Bf16: return "Loom's AVX512-BF16 kernel";
    case Bf16GemmKernel::Float32: return "operands rounded to bfloat16, float32 GEMM";
  }
  return "";
}

}  // namespace

std::string cpu_gemm_report() {
  const CpuFeatures& f = cpu_features();
  std::ostringstream out;
  out << "cpu features: avx2 " << yes(f.avx2) << ", avx512f " << yes(f.avx512f) << ", avx512_bf16 "
      << yes(f.avx512_bf16) << ", avx512_fp16 " << yes(f.avx512_fp16) << ", amx_bf16 " << yes(f.amx_bf16)
      << ", amx_tile " << yes(f.amx_tile) << "\n";
  const FloatGemm g = float_gemm();
  out << "float32 GEMM: " << float_gemm_name(g) << " (" << float_gemm_what(g) << ")\n";
  const Bf16GemmKernel k = bf16_gemm_kernel();
  out << "bfloat16 GEMM: " << bf16_gemm_kernel_name(k) << " (" << bf16_kernel_what(k) << ")\n";
  out << "bfloat16 GEMM kernels this CPU runs:";
  for (Bf16GemmKernel each : {Bf16GemmKernel::OneDnn, Bf16GemmKernel::Avx512Bf16, Bf16GemmKernel::Float32})
    if (bf16_gemm_kernel_available(each)) out << " " << bf16_gemm_kernel_name(each);
  out << "\n";
  out << "oneDNN bfloat16 matmul: ";
  if (onednn_matmul_available(DType::BFloat16))
    out << onednn_matmul_impl(DType::BFloat16, 256, 1024, 1024) << " at (256, 1024) x (1024, 1024)\n";
  else
    out << "unavailable (oneDNN 2.6 needs AVX-512)\n";
  return out.str();
}

}  // namespace loom::kernels::cpu
