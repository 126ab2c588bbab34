// The GEMM compiled for AVX2 + FMA (the build adds the flags to *_avx2.cpp files), for x86
// CPUs without AVX-512 such as AMD's Zen 2/3: 3-4x the baseline build's speed there.
// matmul.cpp calls it only on CPUs that have them (Note [GEMM dispatch] in gemm.h).
#include "kernels/cpu/gemm.h"

#if defined(__AVX2__) && defined(__FMA__)
#define Eigen loom_eigen_avx2
#include "kernels/cpu/gemm_impl.h"

namespace loom::kernels::cpu {
void gemm_avx2(const GemmArgs& args) { gemm_eigen(args); }
}  // namespace loom::kernels::cpu

#else
// Built without the AVX2 flags (not an x86 build): matmul.cpp never selects this.
namespace loom::kernels::cpu {
void gemm_avx2(const GemmArgs& args) { gemm_portable(args); }
}  // namespace loom::kernels::cpu
#endif
