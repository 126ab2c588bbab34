// CUDA kernels of kernels::multi_tensor_norm (clip_grad_norm_'s total norm): per dtype, one
// multi-tensor launch (Note [multi-tensor launches]) in which each block reduces one chunk
// of kNormChunk elements to a double partial in its own slot, then one block folds the
// slots and writes the root into out. Nothing is read back and no atomics are used, so the
// result is the same bits run after run (Note [fixed-order norm] in kernels/math/norm_math.h):
// each thread sums its kNormRun terms in the opmath type, the block folds the threads'
// sums in double through block_reduce's fixed tree. The router has checked the operands.
#include <cuda_runtime.h>

#include <vector>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/math/norm_math.h"

namespace loom::kernels::cuda {
namespace {

static_assert(kListChunk == kNormChunk, "a block's chunk is a CPU task's");
static_assert(kNormChunk / kBlockSize <= kNormRun, "a thread sums at most kNormRun terms in float");

// The sum, or max for p = inf, as a fold for block_reduce.
struct NormFold {
  NormKind kind;
  __device__ double operator()(double a, double b) const { return norm_fold(a, b, kind); }
};

// One launch's tensors and where their partials go: block b's in partials[b].
template <typename T>
struct NormLaunch {
  ListChunks chunks;
  const T* x[kMaxListTensors];
  double* partials;
};

template <NormKind K, typename T>
__global__ void __launch_bounds__(kBlockSize) norm_partials_kernel(NormLaunch<T> a, double p) {
  using M = opmath_t<T>;
  int64_t begin = 0, end = 0;
  const T* x = a.x[a.chunks.tensor_of(int(blockIdx.x), begin, end)];
  const M pm = M(p);
  M acc = M(0);  // this thread's terms: elements threadIdx.x, + kBlockSize, ... of the chunk
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = norm_fold(acc, norm_term(M(x[i]), K, pm), K);
  const double partial = block_reduce(double(acc), NormFold{K}, 0.0);
  if (threadIdx.x == 0) a.partials[blockIdx.x] = partial;
}

// out = root of the fold of partials[0, n) (n may be 0: the norm of nothing, 0).
__global__ void __launch_bounds__(kBlockSize)
    norm_finish_kernel(const double* partials, int64_t n, NormKind kind, double p, double* out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = norm_fold(acc, partials[i], kind);
  acc = block_reduce(acc, NormFold{kind}, 0.0);
  if (threadIdx.x == 0) *out = norm_root(acc, kind, p);
}

template <NormKind K>
void launch_partials(const std::vector<Tensor>& tensors, double p, double* partials, cudaStream_t stream) {
  int64_t next = 0;  // the first free slot
  for_each_dtype_group(tensors, [&](DType dtype, const std::vector<const Tensor*>& of_dtype,
                                    const std::vector<int64_t>& numel) {
    dispatch_floating(dtype, "multi_tensor_norm", [&]<typename T>() {
      for_each_list_launch(numel, [&](const ListChunks& chunks, const std::vector<size_t>& which) {
        NormLaunch<T> a{chunks, {}, partials + next};
        for (int t = 0; t < chunks.count; ++t) a.x[t] = static_cast<const T*>(of_dtype[which[size_t(t)]]->data());
        norm_partials_kernel<K, T><<<unsigned(chunks.blocks()), kBlockSize, 0, stream>>>(a, p);
        LOOM_CUDA_KERNEL_CHECK();
        next += chunks.blocks();
      });
    });
  });
}

void multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  const int device = out.device().index;
  ::loom::cuda::DeviceGuard guard(out.device());
  const cudaStream_t stream = current_stream(device);
  int64_t chunks = 0;
  for (const Tensor& t : tensors) chunks += (t.numel() + kNormChunk - 1) / kNormChunk;
  // One slot per block, from the caching allocator (no sync; a CUDA graph can capture it).
  const Tensor partials = empty({chunks}, TensorOptions(kFloat64).device(out.device()));
  double* slots = static_cast<double*>(partials.data());
  const NormKind kind = norm_kind(p);
  switch (kind) {
    case NormKind::One: launch_partials<NormKind::One>(tensors, p, slots, stream); break;
    case NormKind::Two: launch_partials<NormKind::Two>(tensors, p, slots, stream); break;
    case NormKind::Inf: launch_partials<NormKind::Inf>(tensors, p, slots, stream); break;
    case NormKind::P: launch_partials<NormKind::P>(tensors, p, slots, stream); break;
  }
  norm_finish_kernel<<<1, kBlockSize, 0, stream>>>(slots, chunks, kind, p, static_cast<double*>(out.data()));
  LOOM_CUDA_KERNEL_CHECK();
}

}  // namespace

void add_norm_kernels(Backend& b) { b.multi_tensor_norm = &multi_tensor_norm; }

}  // namespace loom::kernels::cuda
