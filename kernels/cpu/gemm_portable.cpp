// The GEMM compiled for the baseline target, for CPUs without AVX-512 (Note [GEMM
// dispatch] in gemm.h).
#define Eigen loom_eigen_portable
#include "kernels/cpu/gemm_impl.h"

namespace loom::kernels::cpu {
void gemm_portable(const GemmArgs& args) { gemm_eigen(args); }
}  // namespace loom::kernels::cpu
