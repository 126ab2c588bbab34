// One GEMM, C = alpha * A · B + beta * C, on raw strided matrices: the internal interface
// between kernels::bmm (kernels/cpu/matmul.cpp) and the libraries that multiply.
//
// Note [GEMM dispatch]
// float32 products run on oneDNN's sgemm (gemm_onednn.cpp, Debian's libdnnl): on a
// transformer step's shapes it runs at 175-220 GFLOP/s on 2 Zen 4 cores (up to 95% of their
// FMA peak), Eigen's at 170-180 (bench_core's gemm_shape lines, docs/benchmarks.md). It runs on the
// calling thread alone: matmul.cpp splits C across Loom's pool, as it does for Eigen.
// float64, and float32 products too small to pay for oneDNN's per-call checks, run on
// Eigen. Eigen's GEMM is compiled three times, from the same body (gemm_impl.h): gemm_avx512.cpp
// with AVX-512 and FMA (the build adds the flags to every kernels/cpu/*_avx512.cpp),
// gemm_avx2.cpp with AVX2 and FMA (*_avx2.cpp), and gemm_portable.cpp for baseline x86-64.
// matmul.cpp picks the widest copy the CPU can run after a CPUID check, so one binary runs
// everywhere and is fast where it can be. Each copy renames
// Eigen's namespace (#define Eigen loom_eigen_<variant>) so the two differently compiled
// sets of Eigen's inline templates are distinct symbols and the linker cannot mix them.
// Only plain types cross this interface: 16-bit floats are converted to float by the
// caller, so no inline function of Loom's gets instantiated with AVX-512 code.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace loom::kernels::cpu {

// Rows (or columns) of C per block of a GEMM split across threads in deterministic mode:
// fixed, not from the thread count, since the GEMM's own blocking (so the order of its sums
// over K) follows the block's size (Note [deterministic algorithms] in core/deterministic.h).
// 512: each block packs all of the other operand, so smaller blocks cost more packing (256
// made transformer-small's step 8-10% slower than without the mode, 512 1-3%).
constexpr int64_t kDeterministicGemmBlock = 512;

// The rows (or columns) of C per block when a GEMM over `extent` of them is split across
// threads: `by_threads`, the caller's size from the thread count (0: not split), or in
// deterministic mode kDeterministicGemmBlock whatever the threads (0 where the extent fits
// in one block). The one rule of kernels::bmm's float GEMM (matmul.cpp) and of the GEMMs
// around the recurrent layers' sweeps (rnn.cpp).
int64_t gemm_row_block(int64_t extent, int64_t by_threads, bool deterministic);

// A matrix of `rows` x `cols` elements: element (i, j) is at data[i * ld + j] (row-major)
// or data[i + j * ld] (col_major). ld >= the inner extent (cols, or rows when col_major).
struct MatrixRef {
  const void* data = nullptr;
  int64_t ld = 0;
  bool col_major = false;
};

struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;  // C (M, N) = A (M, K) · B (K, N)
  MatrixRef a, b;
  void* c = nullptr;
  int64_t ldc = 0;
  bool c_col_major = false;
  double alpha = 1, beta = 0;   // beta 0: C is overwritten (its old values are not read)
  DType dtype = DType::Float32; // Float32 or Float64
};

void gemm_avx512(const GemmArgs& args);    // needs a CPU with AVX-512 F/BW/DQ/VL and FMA
void gemm_avx2(const GemmArgs& args);      // needs a CPU with AVX2 and FMA
// Whether this CPU can run gemm_avx512 / gemm_avx2 (cpu_features, core/cpu_features.h).
bool cpu_has_avx512();
bool cpu_has_avx2();
void gemm_portable(const GemmArgs& args);  // any x86-64
// The same product written for C^T: C^T (N, M) = B^T (N, K) · A^T (K, M). Transposing a
// matrix flips its storage order and keeps its pointer and ld, so C's order flips too.
GemmArgs transposed_product(const GemmArgs& g);
using GemmFn = void (*)(const GemmArgs&);
// The widest of the three Eigen builds that this CPU runs.
GemmFn best_eigen_gemm();
// float32 on oneDNN's sgemm on the calling thread; float64 and small products on
// best_eigen_gemm(). Throws InternalError if oneDNN refuses the arguments.
void gemm_onednn(const GemmArgs& args);
// Which GEMM kernels::bmm and the fused attention run for float32: oneDNN's unless a test
// or a benchmark forced Eigen's (process-wide; float64 runs on Eigen either way).
enum class FloatGemm { OneDnn, Eigen };
FloatGemm float_gemm();
void force_float_gemm(std::optional<FloatGemm> g);  // nullopt: back to the default
const char* float_gemm_name(FloatGemm g);
// gemm_onednn, or best_eigen_gemm() where Eigen was forced.
GemmFn best_float_gemm();

}  // namespace loom::kernels::cpu
