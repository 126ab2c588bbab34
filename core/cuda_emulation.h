// A host-emulated CUDA device, for testing builds without the CUDA backend.
//
// With emulation on, "cuda:0" exists: tensors put there live in host memory and run on the
// CPU kernels, but they carry the CUDA device, so everything above the kernels behaves as
// on a GPU — which tensor lives where, .to(device) round trips, errors for tensors on two
// devices, optimizer state, checkpoints saved from a device model, a DataLoader pinning
// batches, the examples' --device cuda paths. CI has no GPU; this lets it test that device
// plumbing. It tests no CUDA kernel: the "[.cuda]" tests still need a GPU and stay skipped.
//
// On for a scope with cuda::EmulationGuard (process-wide: for tests, one at a time), or for
// a whole program with the environment variable LOOM_EMULATE_CUDA=1 (read once; a notice
// goes to stderr) — for running a program such as an example, not the test suite, whose
// "[.cuda]" tests skip themselves in a build without CUDA either way. A build with the
// CUDA backend has a real device API: the guard throws there and the variable is ignored.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom {
class Allocator;
}

namespace loom::cuda {

bool emulated();

class EmulationGuard {
 public:
  EmulationGuard();  // DeviceError in a build with the CUDA backend
  ~EmulationGuard();
  EmulationGuard(const EmulationGuard&) = delete;
  EmulationGuard& operator=(const EmulationGuard&) = delete;

 private:
  bool previous_;
  Allocator* previous_allocator_;  // the CUDA allocator installed before, restored after
};

namespace emulation {
// The allocator of the emulated cuda:0 (host blocks tagged with the CUDA device).
Allocator* allocator();
// Bytes of emulated device memory live now and at most since the last reset.
size_t allocated();
size_t max_allocated();
void reset_peak();
// The host syncs a GPU would have made (cuda::host_sync_count): synchronize() of the
// device, a stream or an event, and the copies that would have waited — every copy to the
// host, and a copy to the device unless non_blocking (the emulation does not know which
// host memory is pinned, so it takes a non_blocking copy for one from pinned memory).
void count_host_sync();
uint64_t host_syncs();
}  // namespace emulation

}  // namespace loom::cuda
