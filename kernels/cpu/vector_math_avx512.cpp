// AVX-512 build of the vector math (compiled with -mavx512f etc.; see CMakeLists.txt).
#define Eigen loom_eigen_vector_math_avx512
#define LOOM_VECTOR_MATH_TABLE vector_math_avx512
#include "kernels/cpu/vector_math_impl.h"
