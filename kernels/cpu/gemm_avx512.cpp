// The GEMM compiled for AVX-512 + FMA (the build adds the flags to *_avx512.cpp files);
// matmul.cpp calls it only on CPUs that have them (Note [GEMM dispatch] in gemm.h).
#include "kernels/cpu/gemm.h"

#if defined(__AVX512F__) && defined(__FMA__)
#define Eigen loom_eigen_avx512
#include "kernels/cpu/gemm_impl.h"

namespace loom::kernels::cpu {
void gemm_avx512(const GemmArgs& args) { gemm_eigen(args); }
}  // namespace loom::kernels::cpu

#else
// Built without the AVX-512 flags (not an x86 build): matmul.cpp never selects this.
namespace loom::kernels::cpu {
void gemm_avx512(const GemmArgs& args) { gemm_portable(args); }
}  // namespace loom::kernels::cpu
#endif
