// Each device's claim and mapped record for deferred checks (kernels/cuda/device_check.cuh,
// Note [deferred device checks]): made on a device's first check, kept for the process.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>

#include "core/cuda.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_check.cuh"
#include "kernels/cuda/host_sync.h"

namespace loom::kernels::cuda {
namespace {

struct DeviceChecks {
  DeviceCheckTarget target;
  std::unique_ptr<DeviceCheckMailbox> mailbox;
};

constexpr size_t kMaxDevices = 64;
std::array<std::atomic<DeviceChecks*>, kMaxDevices> per_device{};

DeviceChecks* make_device_checks(int device) {
  ::loom::cuda::DeviceGuard guard(device);
  DeviceCheckClaim* claim = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&claim, sizeof(DeviceCheckClaim)));
  // Zeroed once, before any check can run on any stream: the one wait this costs is at a
  // device's first check, not in a step after it.
  LOOM_CUDA_CHECK(cudaMemset(claim, 0, sizeof(DeviceCheckClaim)));
  synchronize_device();
  void* host = nullptr;
  LOOM_CUDA_CHECK(cudaHostAlloc(&host, sizeof(DeviceCheckRecord), cudaHostAllocMapped));
  auto* record = new (host) DeviceCheckRecord();
  void* mapped = nullptr;
  LOOM_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
  auto rearm = [device, claim] {  // frees the claim for the next failure, in stream order
    LOOM_CUDA_CHECK(cudaMemsetAsync(&claim->launch, 0, sizeof(claim->launch),
                                    static_cast<cudaStream_t>(::loom::cuda::Stream::current(device).handle())));
  };
  return new DeviceChecks{{claim, static_cast<DeviceCheckRecord*>(mapped)},
                          std::make_unique<DeviceCheckMailbox>(record, Device(DeviceType::CUDA, device), rearm)};
}

DeviceChecks& device_checks(int device) {
  LOOM_ASSERT(device >= 0 && size_t(device) < kMaxDevices, "device_checks: device ", device);
  std::atomic<DeviceChecks*>& slot = per_device[size_t(device)];
  if (DeviceChecks* checks = slot.load(std::memory_order_acquire)) return *checks;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (DeviceChecks* checks = slot.load(std::memory_order_acquire)) return *checks;
  DeviceChecks* checks = make_device_checks(device);  // never freed: checks may run until exit
  slot.store(checks, std::memory_order_release);
  return *checks;
}

}  // namespace

DeviceCheckTarget device_check_target(int device) { return device_checks(device).target; }

DeviceCheckSite stamp_device_check(int device, const DeviceCheckSite& site) {
  return device_checks(device).mailbox->stamp(site);
}

void raise_device_check_failure(int device, std::string_view where) {
  if (device < 0 || size_t(device) >= kMaxDevices) return;
  DeviceChecks* checks = per_device[size_t(device)].load(std::memory_order_acquire);
  if (checks != nullptr) checks->mailbox->raise_pending(where);  // none made: no check ever ran there
}

}  // namespace loom::kernels::cuda
