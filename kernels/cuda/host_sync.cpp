// The counted waits of kernels/cuda/host_sync.h, and cuda::host_sync_count().
#include "kernels/cuda/host_sync.h"

#include <atomic>
#include <cstdint>

#include "core/cuda.h"
#include "kernels/cuda/check.h"

namespace loom::kernels::cuda {
namespace {
std::atomic<uint64_t> syncs{0};
}  // namespace

void synchronize_stream(cudaStream_t stream) {
  syncs.fetch_add(1, std::memory_order_relaxed);
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void synchronize_device() {
  syncs.fetch_add(1, std::memory_order_relaxed);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
}

void synchronize_event(cudaEvent_t event) {
  syncs.fetch_add(1, std::memory_order_relaxed);
  LOOM_CUDA_CHECK(cudaEventSynchronize(event));
}

}  // namespace loom::kernels::cuda

namespace loom::cuda {
uint64_t host_sync_count() { return kernels::cuda::syncs.load(std::memory_order_relaxed); }
}  // namespace loom::cuda
