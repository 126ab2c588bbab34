// Calling oneDNN on the calling thread alone (Note [GEMM dispatch] in gemm.h). Included only
// by the files that call oneDNN (gemm_onednn.cpp, onednn_matmul.cpp).
#pragma once

// Debian's oneDNN threads with OpenMP and reads the calling thread's OpenMP thread count;
// declared here rather than through <omp.h>, which only GCC ships outside -fopenmp.
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

namespace loom::kernels::cpu {

// oneDNN on this thread alone while in scope: Loom's pool already splits C across the
// threads (matmul.cpp), and an OpenMP team per call would put two threads on each core. The
// caller's OpenMP setting (a per-thread value) is restored, so a user's own OpenMP code is
// not affected.
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

}  // namespace loom::kernels::cpu
