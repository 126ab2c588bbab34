// AVX2 + FMA build of the vector math (compiled with -mavx2 -mfma; see CMakeLists.txt).
#define Eigen loom_eigen_vector_math_avx2
#define LOOM_VECTOR_MATH_TABLE vector_math_avx2
#include "kernels/cpu/vector_math_impl.h"
