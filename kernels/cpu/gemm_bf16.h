// The bfloat16 GEMM of the CPU: C (float32) = A · B with A and B rounded to bfloat16 and
// the products summed in float32, as PyTorch's CPU matmul of bfloat16 tensors (oneDNN).
//
// Note [bfloat16 GEMM]
// Two kernels, picked at run time (kernels/cpu/gemm_bf16.cpp):
// - avx512_bf16 (kernels/cpu/gemm_bf16_avx512bf16.cpp): AVX512-BF16's vdpbf16ps, which
//   multiplies pairs of bfloat16 and adds both products into one float32 lane. B is packed
//   into panels of 32 columns holding (b[2p][n], b[2p+1][n]) pairs, A into blocks of up to
//   12 rows of (a[m][2p], a[m][2p+1]) pairs (a row-major A's rows copied as they are, their
//   adjacent bfloat16 already pairs; a column-major A's pairs gathered 12 rows per load);
//   a 12 x 32 tile of C lives in 24 registers, each A pair one broadcast.
// - float32: the operands, rounded to bfloat16, widened back to float32 and multiplied by
//   the float32 GEMM (gemm.h): the same products on any x86-64, at float32 speed.
// Both round each operand once (to nearest even), so they differ only in the order of the
// float32 sums. B is packed on its own (PackedBf16B) so a recurrent sweep packs W_hh once
// and reuses it at every step. Measured on a 2-core AVX512-BF16 CPU without AMX (bench_core's
// gemm_bf16 lines), Debian's oneDNN 2.6.3 matmul (brg:avx512_core_bf16, weights reordered
// once) is level with this kernel: 342 / 244 GFLOP/s at 1024³ / 2048³ against 262 / 334, and
// 207 against 196 GFLOP/s on one thread at an LSTM step's (64 x 256) · (256 x 1024).
// AMX tiles (CPUs that have them) are not used yet: such a CPU runs avx512_bf16; oneDNN's
// AMX kernel is the candidate to measure there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"

namespace loom::kernels::cpu {

enum class Bf16GemmKernel { Avx512Bf16, Float32 };

const char* bf16_gemm_kernel_name(Bf16GemmKernel k);
bool cpu_has_avx512_bf16();  // AVX512-BF16 with AVX-512 F/BW/DQ/VL (CPUID, checked once)
// The kernel in use: the CPU's best unless a test forced one.
Bf16GemmKernel bf16_gemm_kernel();
// Forces a kernel (nullopt: back to the CPU's best). Throws loom::ValueError for a kernel
// this CPU cannot run. Process-wide; meant for tests and benchmarks.
void force_bf16_gemm_kernel(std::optional<Bf16GemmKernel> k);

// An operand of the bfloat16 GEMM: float32 or bfloat16 elements, rounded when packed.
struct Bf16Operand {
  MatrixRef m;
  DType dtype = DType::BFloat16;
};

// Uninitialised storage that only grows: packing into it again at a recurring size
// allocates nothing (fresh pages cost as much as the packing itself).
template <typename T>
class GrowingBuffer {
 public:
  T* reserve(size_t n) {
    if (n > capacity_) {
      data_.reset(new T[n]);
      capacity_ = n;
    }
    return data_.get();
  }
  const T* data() const { return data_.get(); }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

// B (K, N), packed for the kernel that was in use when it was packed.
struct PackedBf16B {
  int64_t K = 0, N = 0;
  Bf16GemmKernel kernel = Bf16GemmKernel::Float32;
  GrowingBuffer<uint32_t> pairs;  // avx512_bf16: panels of 32 columns x ceil(K/2) pairs
  GrowingBuffer<float> widened;   // float32: (K, N) row-major, values rounded to bfloat16
};

// Packs B into `out`, reusing its memory.
void pack_bf16_b(const Bf16Operand& b, int64_t K, int64_t N, PackedBf16B& out);

// C (M, N), row-major with row stride ldc, = A (M, K) · B, or += when accumulate. On the
// calling thread.
void gemm_bf16(int64_t M, const Bf16Operand& a, const PackedBf16B& b, float* c, int64_t ldc, bool accumulate);

// The avx512_bf16 kernel's halves (gemm_bf16_avx512bf16.cpp; CPUs with AVX512-BF16 only).
// Their scratch memory comes from the caller: that file holds no inline code of others
// (std containers included) that the linker could pick over a baseline copy.
constexpr int64_t kBf16PackABlock = 192 * 512;  // uint32 of gemm_bf16_avx512bf16's scratch
void pack_bf16_pairs_avx512bf16(const Bf16Operand& b, int64_t K, int64_t N, uint32_t* out,
                                uint32_t* scratch /* K / 2 */);
void gemm_bf16_avx512bf16(int64_t M, const Bf16Operand& a, const uint32_t* b_pairs, int64_t K, int64_t N, float* c,
                          int64_t ldc, bool accumulate, uint32_t* scratch /* kBf16PackABlock */);

}  // namespace loom::kernels::cpu
