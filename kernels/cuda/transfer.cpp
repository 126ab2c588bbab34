// Copies between the host and a GPU, and between GPUs: the CUDA copy_across_devices,
// reached from kernels::copy_across_devices (kernels/cpu/elementwise.cpp) when either side
// is on a GPU. The tensors are contiguous, of one dtype and shape (Tensor::to sees to it),
// so each copy is one cudaMemcpy*Async on the current stream of the GPU side's device.
//
// As in PyTorch, a host <-> device copy returns only when it is done (the stream is
// synchronized) unless non_blocking is set and the host memory is pinned: then it is
// merely queued, and the pinned block is kept from reuse until it completes (Note [pinned
// memory cache]). Copies between GPUs never block the host. A copy that waited reports a
// failed deferred check (Note [deferred device checks] in kernels/support/device_check.h): that is
// how Tensor::item() and to_vector() raise it.
#include <cuda_runtime.h>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_check.cuh"
#include "kernels/cuda/host_sync.h"

namespace loom::cuda::detail {
void record_pinned_use(const void* ptr, void* stream);  // kernels/cuda/cuda_allocator.cpp
}  // namespace loom::cuda::detail

namespace loom::kernels::cuda {

namespace {

using loom::cuda::DeviceGuard;
using loom::cuda::Event;
using loom::cuda::Stream;

cudaStream_t as_cuda(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

// An event on `device` (an event can only be recorded on a stream of its own device).
Event event_on(int device) {
  DeviceGuard guard(device);
  return Event();
}

void copy_host_device(const Tensor& dst, const Tensor& src, size_t bytes, bool non_blocking) {
  const bool to_device = dst.is_cuda();
  const Tensor& gpu = to_device ? dst : src;
  const Tensor& host = to_device ? src : dst;
  const int device = gpu.device().index;
  DeviceGuard guard(device);
  // A blocking copy waits for the GPU; a queued one would be replayed from a host buffer
  // that may be gone (copy inputs into a graph's static tensors before replay()).
  loom::cuda::detail::check_not_capturing(to_device ? "copy from the host to a CUDA tensor"
                                                    : "copy from a CUDA tensor to the host (item(), .to(kCPU))");
  const cudaStream_t stream = as_cuda(Stream::current(device));
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes,
                                  to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
  if (non_blocking && host.is_pinned()) {
    loom::cuda::detail::record_pinned_use(host.impl()->storage->data(), stream);
  } else {
    synchronize_stream(stream);
    raise_device_check_failure(device, to_device ? "a blocking copy to the GPU" : "a copy from the GPU to the host");
  }
}

// The copy runs on the source device's current stream, after the work already queued on
// the destination's current stream (which may still be using dst's memory); then the
// destination's stream waits for it. Each device's later work sees the copy in order.
void copy_device_device(const Tensor& dst, const Tensor& src, size_t bytes) {
  const int dst_device = dst.device().index, src_device = src.device().index;
  const Stream dst_stream = Stream::current(dst_device), src_stream = Stream::current(src_device);
  if (dst_device == src_device) {
    DeviceGuard guard(dst_device);
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, as_cuda(dst_stream)));
    return;
  }
  Event dst_ready = event_on(dst_device);
  dst_ready.record(dst_stream);
  dst_ready.wait(src_stream);
  {
    DeviceGuard guard(src_device);
    LOOM_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data(), dst_device, src.data(), src_device, bytes, as_cuda(src_stream)));
  }
  Event copied = event_on(src_device);
  copied.record(src_stream);
  copied.wait(dst_stream);
  // Destroying the events now is fine: CUDA releases them once they complete.
}

}  // namespace

void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  LOOM_ASSERT(dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() &&
                  src.is_contiguous(),
              "copy_across_devices needs contiguous tensors of one dtype and shape");
  const size_t bytes = dst.nbytes();
  if (bytes == 0) return;
  if (dst.is_cuda() && src.is_cuda()) {
    copy_device_device(dst, src, bytes);
  } else {
    copy_host_device(dst, src, bytes, non_blocking);
  }
}

void add_transfer_kernels(Backend& b) { b.copy_across_devices = &copy_across_devices; }

}  // namespace loom::kernels::cuda
