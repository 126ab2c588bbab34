// Baseline x86-64 build of the vector math, and the run-time choice among the three.
#define Eigen loom_eigen_vector_math_portable
#define LOOM_VECTOR_MATH_TABLE vector_math_portable
#include "kernels/cpu/vector_math_impl.h"

#include "core/cpu_features.h"

namespace loom::kernels::cpu {
namespace {
detail::VectorMathTable widest_table() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f ? detail::vector_math_avx512() : f.avx2 && f.fma ? detail::vector_math_avx2() : detail::vector_math_portable();
}
const detail::VectorMathTable& table() {
  static const detail::VectorMathTable t = widest_table();
  return t;
}
}  // namespace

void sigmoid_inplace(float* x, int64_t n) { table().sigmoid_f(x, n); }
void sigmoid_inplace(double* x, int64_t n) { table().sigmoid_d(x, n); }
void tanh_inplace(float* x, int64_t n) { table().tanh_f(x, n); }
void tanh_inplace(double* x, int64_t n) { table().tanh_d(x, n); }

}  // namespace loom::kernels::cpu
