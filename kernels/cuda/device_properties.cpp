#include "kernels/cuda/device_properties.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "kernels/cuda/check.h"

namespace loom::kernels::cuda {

const DeviceProperties& device_properties(int device) {
  LOOM_ASSERT(device >= 0 && device < kMaxDevices, "device_properties: device index ", device);
  static std::array<DeviceProperties, kMaxDevices> known{};
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[size_t(device)], [device] {
    DeviceProperties& p = known[size_t(device)];
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&p.major, cudaDevAttrComputeCapabilityMajor, device));
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&p.minor, cudaDevAttrComputeCapabilityMinor, device));
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&p.sms, cudaDevAttrMultiProcessorCount, device));
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&p.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  });
  return known[size_t(device)];
}

}  // namespace loom::kernels::cuda
