// CUDA multinomial: the draws of Note [multinomial draws] (kernels/math/multinomial_math.h),
// one thread per (row, sample) with replacement and one per (row, category) for the race
// keys without, so the samples equal the CPU's for the same seed and offset. The rows are
// checked first on the GPU and the verdicts read back (a sync: the price of the CPU's
// ValueError).
#include <cuda_runtime.h>

#include "core/cuda_graph.h"
#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/multinomial_math.h"

namespace loom::kernels::cuda {
namespace {

namespace mm = multinomial_math;

// verdicts (rows, 2): the row's RowProblem and its count of positive weights.
template <typename T>
__global__ void check_rows_kernel(int64_t* verdicts, const T* p, int64_t rows, int64_t categories) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    const mm::RowCheck check = mm::check_row(p + r * categories, categories);
    verdicts[2 * r] = int64_t(check.problem);
    verdicts[2 * r + 1] = check.nonzero;
  }
}

template <typename T>
__global__ void draw_kernel(int64_t* out, const T* p, int64_t draws, int64_t samples, int64_t categories,
                            uint64_t seed, uint64_t offset) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < draws; e += int64_t(gridDim.x) * blockDim.x)
    out[e] = mm::draw_with_replacement(p + (e / samples) * categories, categories, e, seed, offset);
}

template <typename T>
__global__ void race_keys_kernel(double* keys, const T* p, int64_t count, uint64_t seed, uint64_t offset) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    keys[i] = mm::race_key(mm::weight(p[i]), i, seed, offset);
}

}  // namespace

void multinomial(const Tensor& out, const Tensor& probs, bool replacement, uint64_t seed, uint64_t offset) {
  ::loom::cuda::detail::check_not_capturing("multinomial");
  const int64_t rows = probs.size(0), categories = probs.size(1), samples = out.size(1);
  if (rows == 0) return;
  ::loom::cuda::DeviceGuard guard(probs.device());
  const int device = probs.device().index;
  const cudaStream_t stream = current_stream(device);
  const TensorOptions on_device = TensorOptions(kInt64).device(probs.device());
  dispatch_floating(probs.dtype(), "multinomial", [&]<typename T>() {
    const T* p = static_cast<const T*>(probs.data());
    Tensor verdicts = empty({rows, 2}, on_device);
    check_rows_kernel<T><<<grid_size(rows, device), kBlockSize, 0, stream>>>(verdicts.data_ptr<int64_t>(), p, rows,
                                                                            categories);
    LOOM_CUDA_KERNEL_CHECK();
    const std::vector<int64_t> v = verdicts.cpu().to_vector<int64_t>();
    for (int64_t r = 0; r < rows; ++r)
      mm::throw_if_invalid({mm::RowProblem(v[size_t(2 * r)]), v[size_t(2 * r + 1)]}, r, categories, samples,
                           replacement);
    if (replacement) {
      const int64_t draws = rows * samples;
      draw_kernel<T><<<grid_size(draws, device), kBlockSize, 0, stream>>>(out.data_ptr<int64_t>(), p, draws, samples,
                                                                         categories, seed, offset);
      LOOM_CUDA_KERNEL_CHECK();
      return;
    }
    Tensor keys = empty({rows, categories}, TensorOptions(kFloat64).device(probs.device()));  // (rows, categories)
    race_keys_kernel<T><<<grid_size(keys.numel(), device), kBlockSize, 0, stream>>>(keys.data_ptr<double>(), p,
                                                                                   keys.numel(), seed, offset);
    LOOM_CUDA_KERNEL_CHECK();
    kernels::sort(empty({rows, samples}, keys.options()), out, keys, /*descending=*/true);
  });
}

void add_multinomial_kernels(Backend& b) { b.multinomial = &multinomial; }

}  // namespace loom::kernels::cuda
