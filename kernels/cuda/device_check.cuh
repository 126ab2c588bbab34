// The kernel side of Note [deferred device checks] (kernels/support/device_check.h): where a check
// kernel on a device writes a failure, and the device function that writes it.
//
// Each device has a claim in device memory (a lock, which launch holds the record, and that
// launch's first bad position so far) and the record in page-locked host memory mapped into
// the device, which the host reads after a sync without a copy. A failing block takes the
// lock and writes the record only if no earlier launch holds it, or if it is the holder and
// has found an earlier element; the record's kind is written last, so the host never sees a
// kind without its fields. Only failing blocks get that far: a check that passes writes
// nothing.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/support/device_check.h"

namespace loom::kernels::cuda {

struct DeviceCheckClaim {
  unsigned int lock;
  unsigned int launch;  // 0: no launch holds the record
  long long position;
};

struct DeviceCheckTarget {
  DeviceCheckClaim* claim;    // device memory
  DeviceCheckRecord* record;  // the device's address of the mapped host record
};

// For a launch on `device` (current): where its check reports, and `site` stamped with a
// fresh launch id (kernels/cuda/device_check.cpp).
DeviceCheckTarget device_check_target(int device);
DeviceCheckSite stamp_device_check(int device, const DeviceCheckSite& site);
// After a host sync on `device` that user code asked for: throws a recorded failure as its
// IndexError, once (DeviceCheckMailbox::raise_pending). `where` names the call.
void raise_device_check_failure(int device, std::string_view where);

// write_record's publish(): a fence that makes the record's writes visible to the host.
struct SystemFence {
  LOOM_HOST_DEVICE void operator()() const {
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#endif
  }
};

#if defined(__CUDACC__)

// Called by one thread of a block with the block's first bad (position, value).
__device__ inline void report_device_check_failure(const DeviceCheckTarget& target, const DeviceCheckSite& site,
                                                   int64_t position, int64_t value) {
  while (atomicCAS(&target.claim->lock, 0u, 1u) != 0u) {
  }
  __threadfence();
  volatile DeviceCheckClaim* claim = target.claim;
  if (takes_record(claim->launch, claim->position, site.launch, position)) {
    claim->launch = site.launch;
    claim->position = position;
    write_record(target.record, site, position, value, SystemFence{});
  }
  __threadfence();
  atomicExch(&target.claim->lock, 0u);
}

#endif  // __CUDACC__

}  // namespace loom::kernels::cuda
