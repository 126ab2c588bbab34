// The body of the GEMM behind kernels/cpu/gemm.h: Eigen's blocked GEMM, on one thread,
// over Maps of the caller's memory (no copies). Included only by gemm_avx512.cpp and
// gemm_portable.cpp, each after renaming Eigen's namespace (Note [GEMM dispatch]).
#pragma once

#ifndef Eigen
#error "#define Eigen loom_eigen_<variant> before including gemm_impl.h (Note [GEMM dispatch])"
#endif


// GCC 12 warns that Eigen's AVX-512 half-register extracts read an uninitialised
// register (_mm256_undefined_pd, by design); the warning is a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "kernels/cpu/gemm.h"

namespace loom::kernels::cpu {
namespace {  // internal linkage: each including file gets its own copy

template <typename T, int Order>
using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>,
                                  Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename T>
using OutMatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>,
                                Eigen::Unaligned, Eigen::OuterStride<>>;

// C (column-major) = alpha A B + beta C, with A and B in the storage orders given.
template <typename T, int OrderA, int OrderB>
void gemm_typed(const GemmArgs& g) {
  ConstMatrixMap<T, OrderA> A(static_cast<const T*>(g.a.data), g.M, g.K, Eigen::OuterStride<>(g.a.ld));
  ConstMatrixMap<T, OrderB> B(static_cast<const T*>(g.b.data), g.K, g.N, Eigen::OuterStride<>(g.b.ld));
  OutMatrixMap<T> C(static_cast<T*>(g.c), g.M, g.N, Eigen::OuterStride<>(g.ldc));
  const T alpha = T(g.alpha);
  if (g.beta == 0) {
    C.noalias() = alpha * A * B;
  } else {
    if (g.beta != 1) C *= T(g.beta);
    C.noalias() += alpha * A * B;
  }
}

template <typename T>
void gemm_dispatch_orders(const GemmArgs& g) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (g.a.col_major) {
    g.b.col_major ? gemm_typed<T, C, C>(g) : gemm_typed<T, C, R>(g);
  } else {
    g.b.col_major ? gemm_typed<T, R, C>(g) : gemm_typed<T, R, R>(g);
  }
}

void gemm_eigen(const GemmArgs& args) {
  if (args.M == 0 || args.N == 0) return;
  // Only C column-major needs compiling: a row-major C is computed as its transpose.
  const GemmArgs g = args.c_col_major ? args : transposed_product(args);
  if (g.dtype == DType::Float64) gemm_dispatch_orders<double>(g);
  else gemm_dispatch_orders<float>(g);
}

}  // namespace
}  // namespace loom::kernels::cpu

#pragma GCC diagnostic pop
