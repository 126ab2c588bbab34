// Flush-to-zero for the current thread, as a scope guard.
//
// Note [denormals in recurrent backward]
// When a loss reads only the last step of a long sequence, the gradient flowing back
// through time shrinks geometrically until it is made of denormal floats, and x86 cores
// run arithmetic on denormals tens of times slower: one lstm-sentiment step went from
// 0.39 s to 4.9 s. The RNN sweeps therefore flush denormal results to zero (FTZ) and treat
// denormal inputs as zero (DAZ) on the threads that run them. Only values below ~1e-38
// (float) change, far under any tolerance, and the gradients written by the sweep carry
// no denormals into the GEMMs that follow it.
#pragma once

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define LOOM_HAS_MXCSR 1
#endif

namespace loom::kernels::cpu {

class FlushDenormalsGuard {
 public:
  FlushDenormalsGuard() {
#ifdef LOOM_HAS_MXCSR
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
#endif
  }
  ~FlushDenormalsGuard() {
#ifdef LOOM_HAS_MXCSR
    _mm_setcsr(saved_);
#endif
  }
  FlushDenormalsGuard(const FlushDenormalsGuard&) = delete;
  FlushDenormalsGuard& operator=(const FlushDenormalsGuard&) = delete;

 private:
  static constexpr unsigned kFlushToZero = 0x8000;     // MXCSR bit 15
  static constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR bit 6
  unsigned saved_ = 0;
};

}  // namespace loom::kernels::cpu
