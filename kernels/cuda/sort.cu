// CUDA sort and topk: one thread block sorts one row with a bitonic network over the row
// padded to a power of two, under the total order of Note [sort order]
// (kernels/math/sort_math.h), so the result is the CPU's stable one; topk keeps the first k.
// Rows that fit go through shared memory; longer ones through a global scratch buffer
// (fewer blocks at a time, each reusing its slice).
#include <cuda_runtime.h>

#include <algorithm>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/sort_math.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kSortThreads = 512;
constexpr size_t kSharedBytes = 48 * 1024;          // the default dynamic shared memory limit
constexpr int64_t kScratchBytes = int64_t(1) << 28;  // bound on the global buffer for long rows
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

// Whether slot a comes before slot b; a padding slot (index -1) comes after every element.
template <typename M>
__device__ bool slot_before(const M* key, const int64_t* idx, int64_t a, int64_t b, bool descending) {
  if (idx[b] < 0) return idx[a] >= 0;
  if (idx[a] < 0) return false;
  return sort_math::sorts_before(key[a], idx[a], key[b], idx[b], descending);
}

// Rows of x (rows, n), each sorted in `padded` (a power of two >= n) slots of idx and
// key: the block's slice of the scratch buffers, or shared memory when they are null.
template <typename T, typename M>
__global__ void __launch_bounds__(kSortThreads)
    sort_rows_kernel(T* values, int64_t* indices, const T* x, int64_t rows, int64_t n, int64_t k, int64_t padded,
                     bool descending, int64_t* idx_scratch, M* key_scratch) {
  extern __shared__ int64_t shared_words[];
  int64_t* idx = idx_scratch != nullptr ? idx_scratch + blockIdx.x * padded : shared_words;
  M* key = key_scratch != nullptr ? key_scratch + blockIdx.x * padded : reinterpret_cast<M*>(shared_words + padded);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) {
      idx[i] = i < n ? i : -1;
      if (i < n) key[i] = M(in[i]);
    }
    __syncthreads();
    // The bitonic network: merges of sorted runs of size/2 into runs of `size`, the
    // run's direction alternating with bit `size` of the slot.
    for (int64_t size = 2; size <= padded; size <<= 1) {
      for (int64_t stride = size / 2; stride > 0; stride >>= 1) {
        for (int64_t t = threadIdx.x; t < padded / 2; t += blockDim.x) {
          const int64_t i = 2 * stride * (t / stride) + t % stride, j = i + stride;
          const bool ascending = (i & size) == 0;
          if (ascending ? slot_before(key, idx, j, i, descending) : slot_before(key, idx, i, j, descending)) {
            const int64_t ti = idx[i];
            idx[i] = idx[j], idx[j] = ti;
            const M tk = key[i];
            key[i] = key[j], key[j] = tk;
          }
        }
        __syncthreads();
      }
    }
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      values[row * k + j] = in[idx[j]];
      indices[row * k + j] = idx[j];
    }
    __syncthreads();  // the next row overwrites the slots
  }
}

}  // namespace

void sort(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
  const int64_t rows = in.size(0), n = in.size(1), k = values.size(1);
  if (rows == 0 || k == 0) return;
  ::loom::cuda::DeviceGuard guard(in.device());
  const cudaStream_t stream = current_stream(in.device().index);
  int64_t padded = 2;
  while (padded < n) padded <<= 1;
  dispatch_all(in.dtype(), "sort", [&]<typename T>() {
    using M = opmath_t<T>;
    const size_t shared_bytes = size_t(padded) * (sizeof(int64_t) + sizeof(M));
    const bool in_shared = shared_bytes <= kSharedBytes;
    int64_t blocks = std::min(rows, kMaxBlocks);
    Tensor idx_scratch, key_scratch;  // (blocks, padded) each; a key takes at most 8 bytes
    if (!in_shared) {
      blocks = std::clamp<int64_t>(kScratchBytes / (padded * 16), 1, blocks);
      idx_scratch = empty({blocks, padded}, TensorOptions(kInt64).device(in.device()));
      key_scratch = empty({blocks, padded}, TensorOptions(kInt64).device(in.device()));
    }
    sort_rows_kernel<T, M><<<unsigned(blocks), kSortThreads, in_shared ? shared_bytes : 0, stream>>>(
        static_cast<T*>(values.data()), static_cast<int64_t*>(indices.data()), static_cast<const T*>(in.data()),
        rows, n, k, padded, descending, in_shared ? nullptr : static_cast<int64_t*>(idx_scratch.data()),
        in_shared ? nullptr : static_cast<M*>(key_scratch.data()));
    LOOM_CUDA_KERNEL_CHECK();
  });
}

void add_sort_kernels(Backend& b) { b.sort = &sort; }

}  // namespace loom::kernels::cuda
