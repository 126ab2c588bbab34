// CUDA kernels of the gradient scaler (kernels::unscale_grad, update_scale): a grid-stride
// pass over a gradient that unscales it and flags a non-finite element in found_inf, and a
// one-thread update of the scale, so the scale and its growth tracker stay on the GPU and
// nothing waits for it (kernels/amp_math.h, the same math as the CPU). The router has
// checked the operands.
#include <cuda_runtime.h>

#include "kernels/amp_math.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"

namespace loom::kernels::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    unscale_kernel(int64_t n, T* g, float* found_inf, const float* inv_scale) {
  using M = opmath_t<T>;
  const M inv = M(*inv_scale);
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += threads) {
    const M v = M(g[i]);
    if (!finite(v)) *found_inf = 1.0f;  // every writer writes the same value
    g[i] = T(v * inv);
  }
}

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                    float growth_factor, float backoff_factor, int32_t growth_interval) {
  update_scale_math(*scale, *growth_tracker, *found_inf != 0.0f, growth_factor, backoff_factor, growth_interval);
}

void unscale_grad(const Tensor& g, const Tensor& found_inf, const Tensor& inv_scale) {
  const int64_t n = g.numel();
  if (n == 0) return;
  const int device = g.device().index;
  ::loom::cuda::DeviceGuard guard(g.device());
  dispatch_floating(g.dtype(), "unscale_grad", [&]<typename T>() {
    unscale_kernel<T><<<grid_size(n, device), kBlockSize, 0, current_stream(device)>>>(
        n, static_cast<T*>(g.data()), static_cast<float*>(found_inf.data()),
        static_cast<const float*>(inv_scale.data()));
    LOOM_CUDA_KERNEL_CHECK();
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
  b.unscale_grad = &unscale_grad;
  b.update_scale = &update_scale;
}

}  // namespace loom::kernels::cuda
