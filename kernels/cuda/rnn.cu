// CUDA recurrent layers: kernels::rnn_layer_forward/backward for tensors on a GPU, as the
// step-functor sweep of kernels/rnn/rnn_sweep.h (Note [step-functor RNN sweep]) with each
// step's functor launched as one grid-stride kernel on the current stream. The sweep is
// also what the fused cell modules (nn::LSTMCell, ...) run: a one-step layer.
// nn::RNN/LSTM/GRU use cuDNN instead where it is available (kernels/cuda/cudnn_rnn.cpp).
// A bfloat16 or float16 layer or cell (autocast's) runs the float32 sweep on its inputs
// widened to float32 and rounds what it returns once (Note [16-bit recurrent layers]):
// float32 gate math, cell state and reserve, float32 GEMMs.
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/rnn/rnn_sweep.h"

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
  if (rnn_rules::is_16_bit(in.x.dtype()))
    return rnn_rules::forward_in_float32(in, [&](const RNNLayerInput& f) { return rnn_sweep::forward<float>(f, exec); });
  return dispatch_floating(in.x.dtype(), "rnn", [&]<typename T>() -> RNNLayerOutput {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return rnn_sweep::forward<T>(in, exec);
    else throw DTypeError("rnn: unsupported dtype");
  });
}

RNNLayerGrads rnn_layer_backward(const RNNLayerInput& in, const RNNReserve& reserve, const Tensor& dy,
                                 const Tensor& dh_n, const Tensor& dc_n) {
  ::loom::cuda::DeviceGuard guard(in.x.device());
  const LaunchForEach exec{in.x.device().index};
  if (rnn_rules::is_16_bit(in.x.dtype())) {
    return rnn_rules::backward_in_float32(
        in, dy, dh_n, dc_n, [&](const RNNLayerInput& f, const Tensor& dy32, const Tensor& dh32, const Tensor& dc32) {
          return rnn_sweep::backward<float>(f, reserve, dy32, dh32, dc32, exec);
        });
  }
  return dispatch_floating(in.x.dtype(), "rnn", [&]<typename T>() -> RNNLayerGrads {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      return rnn_sweep::backward<T>(in, reserve, dy, dh_n, dc_n, exec);
    else throw DTypeError("rnn: unsupported dtype");
  });
}

void add_rnn_kernels(Backend& b) {
  b.rnn_layer_forward = &rnn_layer_forward;
  b.rnn_layer_backward = &rnn_layer_backward;
}

}  // namespace loom::kernels::cuda
