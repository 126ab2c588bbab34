// loom-cpu-info: which GEMM kernels Loom runs on this CPU and why (the CPU's features, the
// float32 and bfloat16 GEMM chosen, oneDNN's bfloat16 matmul); printed by loom-info.
// Honours LOOM_CPU_BF16_GEMM and LOOM_CPU_FLOAT_GEMM (kernels/cpu/gemm_env.h): an invalid
// value is reported and the exit status is 1.
#include <cstdio>
#include <exception>

#include "kernels/cpu/gemm_report.h"

int main() {
  try {
    std::fputs(loom::kernels::cpu::cpu_gemm_report().c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-cpu-info: %s\n", e.what());
    return 1;
  }
}
