// CUDA kernels for the optimizers' fused updates (kernels::sgd_update, adam_update,
// rmsprop_update): per parameter and step, one grid-stride pass over p, its gradient and
// its states that runs update_element (kernels/optim_math.h), the same per-element code as
// the CPU loop, with the math narrowed from double to the opmath type. The router has
// checked the operands.
#include <cuda_runtime.h>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/optim_math.h"

namespace loom::kernels::cuda {
namespace {

template <typename T, size_t K, typename Math>
__global__ void __launch_bounds__(kBlockSize)
    fused_update_kernel(int64_t n, Math math, T* p, const T* g, Array<T*, int(K)> states) {
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += threads)
    update_element<T, K>(math, i, p, g, states.v);
}

template <size_t K, template <typename> class MathT>
void launch(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, K>& states,
            const MathT<double>& math) {
  const int64_t n = p.numel();
  if (n == 0) return;
  const int device = p.device().index;
  ::loom::cuda::DeviceGuard guard(p.device());
  dispatch_floating(p.dtype(), op, [&]<typename T>() {
    Array<T*, int(K)> state_ptrs;
    for (size_t k = 0; k < K; ++k)
      state_ptrs[int(k)] = states[k].defined() ? static_cast<T*>(states[k].data()) : nullptr;
    fused_update_kernel<T, K><<<grid_size(n, device), kBlockSize, 0, current_stream(device)>>>(
        n, narrow<opmath_t<T>>(math), static_cast<T*>(p.data()), static_cast<const T*>(g.data()), state_ptrs);
    LOOM_CUDA_KERNEL_CHECK();
  });
}

}  // namespace

void add_optimizer_kernels(Backend& b) {
  b.sgd_update = &launch<1, SgdMath>;
  b.adam_update = &launch<3, AdamMath>;
  b.rmsprop_update = &launch<3, RmspropMath>;
}

}  // namespace loom::kernels::cuda
