// CUDA kernels of the gradient scaler (kernels::unscale_grads, update_scale): one launch per
// dtype over the gradients (Note [multi-tensor launches]) that unscales them and flags a
// non-finite element in found_inf, and a one-thread update of the scale, so the scale and
// its growth tracker stay on the GPU and nothing waits for it (kernels/math/amp_math.h, the same
// math as the CPU). The router has checked the operands.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/math/amp_math.h"

namespace loom::kernels::cuda {
namespace {

// One launch's gradients (Note [multi-tensor launches]).
template <typename T>
struct UnscaleLaunch {
  ListChunks chunks;
  T* g[kMaxListTensors];
  float* found_inf;
  const float* inv_scale;
};

template <typename T>
__global__ void __launch_bounds__(kBlockSize) unscale_list_kernel(UnscaleLaunch<T> a) {
  using M = opmath_t<T>;
  int64_t begin = 0, end = 0;
  T* g = a.g[a.chunks.tensor_of(int(blockIdx.x), begin, end)];
  const M inv = M(*a.inv_scale);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const M v = M(g[i]);
    if (!finite(v)) *a.found_inf = 1.0f;  // every writer writes the same value
    g[i] = T(v * inv);
  }
}

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                    float growth_factor, float backoff_factor, int32_t growth_interval) {
  update_scale_math(*scale, *growth_tracker, *found_inf != 0.0f, growth_factor, backoff_factor, growth_interval);
}

// One launch per dtype (and per kMaxListTensors gradients).
void unscale_grads(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const int device = grads.front().device().index;
  ::loom::cuda::DeviceGuard guard(grads.front().device());
  const cudaStream_t stream = current_stream(device);
  for_each_dtype_group(grads, [&](DType dtype, const std::vector<const Tensor*>& of_dtype,
                                  const std::vector<int64_t>& numel) {
    dispatch_floating(dtype, "unscale_grads", [&]<typename T>() {
      for_each_list_launch(numel, [&](const ListChunks& chunks, const std::vector<size_t>& which) {
        UnscaleLaunch<T> a{chunks, {}, static_cast<float*>(found_inf.data()),
                           static_cast<const float*>(inv_scale.data())};
        for (int t = 0; t < chunks.count; ++t) a.g[t] = static_cast<T*>(of_dtype[which[size_t(t)]]->data());
        unscale_list_kernel<T><<<unsigned(chunks.blocks()), kBlockSize, 0, stream>>>(a);
        LOOM_CUDA_KERNEL_CHECK();
      });
    });
  });
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval) {
  const int device = scale.device().index;
  ::loom::cuda::DeviceGuard guard(scale.device());
  update_scale_kernel<<<1, 1, 0, current_stream(device)>>>(
      static_cast<float*>(scale.data()), static_cast<int32_t*>(growth_tracker.data()),
      static_cast<const float*>(found_inf.data()), float(growth_factor), float(backoff_factor),
      int32_t(growth_interval));
  LOOM_CUDA_KERNEL_CHECK();
}

}  // namespace

void add_amp_kernels(Backend& b) {
  b.unscale_grads = &unscale_grads;
  b.update_scale = &update_scale;
}

}  // namespace loom::kernels::cuda
