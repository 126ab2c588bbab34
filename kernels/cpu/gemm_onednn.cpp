// The float32 GEMM on oneDNN's sgemm (Debian's libdnnl), one calling thread per call
// (Note [GEMM dispatch] in gemm.h).
#include <oneapi/dnnl/dnnl.h>

#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn_threads.h"

namespace loom::kernels::cpu {

namespace {

// Products smaller than this (multiply-adds) stay on Eigen: oneDNN's per-call checks cost
// more than an 8³ product (0.34 against 0.08 µs); from 64³ on it is 1.2-2x Eigen's speed.
constexpr int64_t kOneDnnMinWork = int64_t(32) * 32 * 32;

}  // namespace

void gemm_onednn(const GemmArgs& args) {
  // K == 0: sgemm would leave C as it was where beta is 0 (the interface says zeros).
  if (args.dtype != DType::Float32 || args.K == 0 || args.M * args.N * args.K < kOneDnnMinWork) {
    best_eigen_gemm()(args);
    return;
  }
  // (An empty C has no multiply-adds: Eigen took it above.) sgemm is row-major.
  const GemmArgs g = args.c_col_major ? transposed_product(args) : args;
  // A column-major (M, K) operand with stride ld is a row-major (K, M) one read transposed.
  const char trans_a = g.a.col_major ? 'T' : 'N', trans_b = g.b.col_major ? 'T' : 'N';
  OneThreadOpenMP one_thread;
  const dnnl_status_t status =
      dnnl_sgemm(trans_a, trans_b, g.M, g.N, g.K, float(g.alpha), static_cast<const float*>(g.a.data), g.a.ld,
                 static_cast<const float*>(g.b.data), g.b.ld, float(g.beta), static_cast<float*>(g.c), g.ldc);
  LOOM_CHECK(status == dnnl_success, InternalError, "matmul: oneDNN's sgemm refused (status ", int(status),
             ") a product of M ", g.M, ", N ", g.N, ", K ", g.K, " with ld ", g.a.ld, ", ", g.b.ld, ", ", g.ldc,
             " and transposes ", trans_a, trans_b);
}

}  // namespace loom::kernels::cpu
