// The cuDNN callers' shared pieces (kernels/cuda/cudnn_util.h); nothing without cuDNN.
#ifdef LOOM_WITH_CUDNN

#include "kernels/cuda/cudnn_util.h"

#include <map>

#include "core/cuda.h"
#include "core/factories.h"
#include "kernels/cuda/check.h"

namespace loom::kernels::cuda {

cudaStream_t stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(::loom::cuda::Stream::current(t.device().index).handle());
}

cudnnHandle_t cudnn_handle(int device, cudaStream_t stream) {
  thread_local std::map<int, cudnnHandle_t> handles;
  cudnnHandle_t& h = handles[device];
  if (h == nullptr) LOOM_CUDNN_CHECK(cudnnCreate(&h));
  LOOM_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

Tensor device_bytes(size_t bytes, Device device, bool zeroed) {
  const Shape shape{int64_t((bytes + 7) / 8)};
  const TensorOptions opt = TensorOptions(kInt64).device(device);
  return zeroed ? zeros(shape, opt) : empty(shape, opt);
}

}  // namespace loom::kernels::cuda

#endif  // LOOM_WITH_CUDNN
