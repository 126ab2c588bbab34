// CUDA kernels for the optimizers' fused updates (declared in kernels/cuda/optim_update.h):
// per parameter and step, one grid-stride pass over p, its gradient and its states that
// runs optim::update_element (optim/fused_update.h), the same per-element code as the CPU
// loop, with the math of optim/update_math.h narrowed from double to the opmath type.
#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/optim_update.h"
#include "optim/fused_update.h"

namespace loom::kernels::cuda {
namespace {

// The math in opmath M, each field narrowed from double as the CPU's M(double) does.
template <typename M>
optim::SgdMath<M> narrow(const optim::SgdMath<double>& d) {
  return {M(d.lr), M(d.momentum), M(d.dampening), M(d.weight_decay), d.nesterov, d.first_step};
}
template <typename M>
optim::AdamMath<M> narrow(const optim::AdamMath<double>& d) {
  return {M(d.lr), M(d.beta1), M(d.beta2), M(d.eps), M(d.weight_decay),
          M(d.step_size), M(d.bias_correction2_sqrt), d.decoupled, d.amsgrad};
}
template <typename M>
optim::RmspropMath<M> narrow(const optim::RmspropMath<double>& d) {
  return {M(d.lr), M(d.alpha), M(d.eps), M(d.weight_decay), M(d.momentum), d.centered};
}

template <typename T, size_t K, typename Math>
__global__ void __launch_bounds__(kBlockSize)
    fused_update_kernel(int64_t n, Math math, T* p, const T* g, Array<T*, int(K)> states) {
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += threads)
    optim::update_element<T, K>(math, i, p, g, states.v);
}

template <size_t K, template <typename> class MathT>
void launch(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, K>& states,
            const MathT<double>& math) {
  LOOM_CHECK(p.is_cuda(), DeviceError, op, ": expected a CUDA parameter, got one on ", p.device());
  LOOM_CHECK(g.defined(), ValueError, op, ": the parameter has no gradient");
  // (This entry point is public: it checks everything itself, the parameter and gradient too.)
  optim::check_update_operand(op, p, p, "parameter");
  optim::check_update_operand(op, p, g, "gradient");
  for (const Tensor& s : states)
    if (s.defined()) optim::check_update_operand(op, p, s, "state tensor");
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

void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, 1>& states,
                  const optim::SgdMath<double>& math) {
  launch(op, p, g, states, math);
}

void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, 3>& states,
                  const optim::AdamMath<double>& math) {
  launch(op, p, g, states, math);
}

void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, 3>& states,
                  const optim::RmspropMath<double>& math) {
  launch(op, p, g, states, math);
}

}  // namespace loom::kernels::cuda
