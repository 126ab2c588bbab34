// Vectorised transcendental functions over contiguous arrays (Eigen's packet math),
// compiled three times — for AVX-512, for AVX2 + FMA and for baseline x86-64 — and picked at run time, like
// the GEMM (kernels/cpu/gemm.h). In place: x[i] = f(x[i]).
#pragma once

#include <cstdint>

namespace loom::kernels::cpu {

void sigmoid_inplace(float* x, int64_t n);
void sigmoid_inplace(double* x, int64_t n);
void tanh_inplace(float* x, int64_t n);
void tanh_inplace(double* x, int64_t n);

namespace detail {
struct VectorMathTable {
  void (*sigmoid_f)(float*, int64_t);
  void (*sigmoid_d)(double*, int64_t);
  void (*tanh_f)(float*, int64_t);
  void (*tanh_d)(double*, int64_t);
};
VectorMathTable vector_math_avx512();
VectorMathTable vector_math_avx2();
VectorMathTable vector_math_portable();
}  // namespace detail

}  // namespace loom::kernels::cpu
