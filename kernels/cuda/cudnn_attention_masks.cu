// The cuDNN attention tier's mask kernels (kernels/cuda/cudnn_attention_masks.h): a key
// padding mask's key counts, cuDNN's padding lengths, found on the GPU so no step waits
// for it; and the rows with every key masked, made 0 with lse +inf as every other tier
// gives them, whatever cuDNN wrote there.
#include "kernels/cuda/cudnn_attention_masks.h"

#include <cuda_runtime.h>

#include <cmath>
#include <limits>

#include "kernels/attention/attention_layout.h"
#include "kernels/cuda/launch.cuh"

namespace loom::kernels::cuda {
namespace {

// Block b: counts[b] = 1 + the last j < S whose bias at row + j * col_stride is > -inf.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    key_counts_kernel(int32_t* counts, const T* bias, int64_t batch_stride, int64_t col_stride, int64_t S) {
  __shared__ int32_t last;
  if (threadIdx.x == 0) last = 0;
  __syncthreads();
  const T* row = bias + int64_t(blockIdx.x) * batch_stride;
  int32_t mine = 0;
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
    if (float(row[j * col_stride]) > -std::numeric_limits<float>::infinity()) mine = int32_t(j + 1);
  if (mine > 0) atomicMax(&last, mine);
  __syncthreads();
  if (threadIdx.x == 0) counts[blockIdx.x] = last;
}

// One warp per row g = n L + i of (N, L): a dead row gets lse +inf and out 0.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    zero_dead_rows_kernel(T* out, RowLayout lo, float* lse, const int32_t* counts, int64_t heads, int64_t rows,
                          int64_t L, int64_t Ev) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; g < rows; g += warps) {
    const int64_t n = g / L;
    const bool dead = !isfinite(lse[g]) || (counts != nullptr && counts[n / heads] == 0);
    if (!dead) continue;
    T* row = out + lo.at(n, g % L);
    for (int64_t c = lane; c < Ev; c += 32) row[c] = T(0.0f);
    if (lane == 0) lse[g] = std::numeric_limits<float>::infinity();
  }
}

// fn.template operator()<T>() for a 16-bit float dtype.
template <typename F>
void dispatch_16bit(DType dtype, const char* op, F&& fn) {
  LOOM_CHECK(dtype == kFloat16 || dtype == kBFloat16, DTypeError, op, ": expected float16 or bfloat16, got ",
             dtype_name(dtype));
  if (dtype == kFloat16) fn.template operator()<Half>();
  else fn.template operator()<BFloat16>();
}

}  // namespace

void key_counts(const Tensor& counts, const Tensor& bias) {
  const int64_t B = counts.numel(), S = bias.size(-1);
  LOOM_ASSERT(counts.dtype() == kInt32 && counts.is_contiguous() && bias.size(0) == B, "key_counts: bad arguments");
  if (B == 0) return;
  ::loom::cuda::DeviceGuard guard(bias.device());
  const cudaStream_t stream = current_stream(bias.device().index);
  dispatch_16bit(bias.dtype(), "key_counts", [&]<typename T>() {
    key_counts_kernel<T><<<unsigned(B), kBlockSize, 0, stream>>>(static_cast<int32_t*>(counts.data()),
                                                                 static_cast<const T*>(bias.data()), bias.stride(0),
                                                                 bias.stride(-1), S);
    LOOM_CUDA_KERNEL_CHECK();
  });
}

void zero_dead_rows(const Tensor& out, const Tensor& lse, const Tensor& counts, int64_t heads) {
  const int64_t rows = lse.numel(), L = lse.size(1), Ev = out.size(-1);
  LOOM_ASSERT(lse.dtype() == kFloat32 && lse.is_contiguous() && (!counts.defined() || counts.dtype() == kInt32),
              "zero_dead_rows: bad arguments");
  if (rows == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  dispatch_16bit(out.dtype(), "zero_dead_rows", [&]<typename T>() {
    zero_dead_rows_kernel<T><<<grid_size(rows * 32, device), kBlockSize, 0, stream>>>(
        static_cast<T*>(out.data()), row_layout(out), static_cast<float*>(lse.data()),
        counts.defined() ? static_cast<const int32_t*>(counts.data()) : nullptr, heads, rows, L, Ev);
    LOOM_CUDA_KERNEL_CHECK();
  });
}

}  // namespace loom::kernels::cuda
