// CUDA recurrent layers: kernels::rnn_layer_forward/backward for tensors on a GPU, as the
// step-functor sweep of kernels/rnn_sweep.h (Note [step-functor RNN sweep]) with each
// step's functor launched as one grid-stride kernel on the current stream. The sweep is
// also what the fused cell modules (nn::LSTMCell, ...) run: a one-step layer.
// nn::RNN/LSTM/GRU use cuDNN instead where it is available (kernels/cuda/cudnn_rnn.cpp).
#include <cuda_runtime.h>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/rnn_sweep.h"

namespace loom::kernels::cuda {
namespace {

template <typename F>
__global__ void __launch_bounds__(kBlockSize) for_each_kernel(int64_t n, F f) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    f(i);
}

// The sweep's executor: f(i) for i in [0, n) as one kernel on the device's current stream.
struct LaunchForEach {
  int device;
  template <typename F>
  void operator()(int64_t n, const F& f) const {
    if (n == 0) return;
    for_each_kernel<<<grid_size(n, device), kBlockSize, 0, current_stream(device)>>>(n, f);
    LOOM_CUDA_KERNEL_CHECK();
  }
};

}  // namespace

RNNLayerOutput rnn_layer_forward(const RNNLayerInput& in) {
  ::loom::cuda::DeviceGuard guard(in.x.device());
  const LaunchForEach exec{in.x.device().index};
  return dispatch_floating(in.x.dtype(), "rnn", [&]<typename T>() {
    return rnn_sweep::forward<T>(in, exec);
  });
}

RNNLayerGrads rnn_layer_backward(const RNNLayerInput& in, const RNNReserve& reserve, const Tensor& dy,
                                 const Tensor& dh_n, const Tensor& dc_n) {
  ::loom::cuda::DeviceGuard guard(in.x.device());
  const LaunchForEach exec{in.x.device().index};
  return dispatch_floating(in.x.dtype(), "rnn", [&]<typename T>() {
    return rnn_sweep::backward<T>(in, reserve, dy, dh_n, dc_n, exec);
  });
}

void add_rnn_kernels(Backend& b) {
  b.rnn_layer_forward = &rnn_layer_forward;
  b.rnn_layer_backward = &rnn_layer_backward;
}

}  // namespace loom::kernels::cuda
