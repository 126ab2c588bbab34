// The float32 GEMM on oneDNN's sgemm (Debian's libdnnl), one calling thread per call
// (Note [GEMM dispatch] in gemm.h).
#include <oneapi/dnnl/dnnl.h>

#include "core/error.h"
#include "kernels/cpu/gemm.h"

// Debian's oneDNN threads with OpenMP and reads the calling thread's OpenMP thread count;
// declared here rather than through <omp.h>, which only GCC ships outside -fopenmp.
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

namespace loom::kernels::cpu {

namespace {

// Products smaller than this (multiply-adds) stay on Eigen: oneDNN's per-call checks cost
// more than an 8³ product (0.34 against 0.08 µs); from 64³ on it is 1.2-2x Eigen's speed.
constexpr int64_t kOneDnnMinWork = int64_t(32) * 32 * 32;

// oneDNN's sgemm on this thread alone: Loom's pool already splits C across the threads
// (matmul.cpp), and an OpenMP team per call would put two threads on each core. The
// caller's OpenMP setting is restored, so a user's own OpenMP code is not affected.
class OneThreadOpenMP {
 public:
  OneThreadOpenMP() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneThreadOpenMP() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneThreadOpenMP(const OneThreadOpenMP&) = delete;
  OneThreadOpenMP& operator=(const OneThreadOpenMP&) = delete;

 private:
  int saved_;
};

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
