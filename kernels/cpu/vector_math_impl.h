// The body of kernels/cpu/vector_math_{avx512,portable}.cpp: each includes this after
// renaming Eigen's namespace (see the .cpp files) so the two builds never mix.
#include <Eigen/Core>

#include "kernels/cpu/vector_math.h"

namespace loom::kernels::cpu::detail {
namespace {

template <typename T>
void sigmoid_impl(T* x, int64_t n) {
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> a(x, n);
  a = a.logistic();
}

template <typename T>
void tanh_impl(T* x, int64_t n) {
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> a(x, n);
  a = a.tanh();
}

}  // namespace

VectorMathTable LOOM_VECTOR_MATH_TABLE() {
  return {&sigmoid_impl<float>, &sigmoid_impl<double>, &tanh_impl<float>, &tanh_impl<double>};
}

}  // namespace loom::kernels::cpu::detail
