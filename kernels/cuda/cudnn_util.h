// What the cuDNN callers share (kernels/cuda/cudnn_rnn.cpp, kernels/cuda/cudnn_attention.cpp):
// this thread's handle bound to a stream, and byte buffers from Loom's caching allocator.
// Only in a build with cuDNN (LOOM_WITH_CUDNN).
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>

#include "core/tensor.h"

namespace loom::kernels::cuda {

// The current stream of t's device (Note [current stream] in kernels/cuda/device.cpp).
cudaStream_t stream_of(const Tensor& t);

// This thread's cuDNN handle for `device`, bound to `stream` (one per device and thread, as
// for cuBLAS; never destroyed, as the driver may be gone at thread exit).
cudnnHandle_t cudnn_handle(int device, cudaStream_t stream);

// A device buffer of at least `bytes` bytes from the caching allocator (Loom has no byte
// dtype: int64 words), zeroed or not.
Tensor device_bytes(size_t bytes, Device device, bool zeroed);

}  // namespace loom::kernels::cuda
