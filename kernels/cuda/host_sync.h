// The host's waits for a GPU. Every one Loom makes goes through these functions, which
// count it: cuda::host_sync_count() (core/cuda.h) is the total, and a test brackets a
// training step with it to show that the step makes none (docs/cuda.md, "A step without
// host syncs"). A wait that user code asked for (a copy to the host, synchronize()) is
// followed by raise_device_check_failure (kernels/cuda/device_check.cuh): it is where a
// failed deferred check surfaces.
#pragma once

#include <cuda_runtime.h>

namespace loom::kernels::cuda {

void synchronize_stream(cudaStream_t stream);
void synchronize_device();  // the current device
void synchronize_event(cudaEvent_t event);

}  // namespace loom::kernels::cuda
