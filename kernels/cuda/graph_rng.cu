// Before a replay of a CUDA graph whose kernels draw random numbers: the graph's device
// words {seed, base} (Note [graph-safe random numbers] in kernels/cuda/philox_args.h),
// written by a one-thread kernel on the replay's stream, so the host never waits.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/check.h"

namespace loom::cuda::detail {
namespace {
__global__ void write_philox_state_kernel(uint64_t* state, uint64_t seed, uint64_t base) {
  state[0] = seed;
  state[1] = base;
}
}  // namespace

void write_philox_state(void* state, uint64_t seed, uint64_t base, void* stream) {
  write_philox_state_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<uint64_t*>(state), seed, base);
  LOOM_CUDA_KERNEL_CHECK();
}
}  // namespace loom::cuda::detail
