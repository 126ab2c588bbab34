// What the kernels and the library rules ask of a GPU — compute capability, SM count,
// opt-in shared memory — read from the driver once per device and kept (a launch asks for
// the SM count every time; cudaDeviceGetAttribute is a driver call).
#pragma once

namespace loom::kernels::cuda {

constexpr int kMaxDevices = 64;

struct DeviceProperties {
  int major = 0, minor = 0;  // compute capability
  int sms = 0;               // streaming multiprocessors
  int smem_optin = 0;        // shared memory a block may opt in to, bytes
};

// device in [0, kMaxDevices); asked of the driver on the first call for that device.
const DeviceProperties& device_properties(int device);

}  // namespace loom::kernels::cuda
