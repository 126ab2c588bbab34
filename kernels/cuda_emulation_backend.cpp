// The CUDA backend of a build without it (compiled only then; CMakeLists.txt): the CPU
// table while the host-emulated cuda:0 is on (core/cuda_emulation.h), whose tensors live
// in host memory; no backend otherwise, so kernels on cuda:0 say Loom was built without
// CUDA support. Its copies between the host and the device count the host syncs a GPU
// would have made (cuda::emulation::count_host_sync).
#include "core/cuda_emulation.h"
#include "kernels/backend.h"

namespace loom::kernels {
namespace {

void emulated_copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (dst.is_cpu() || (src.is_cpu() && !non_blocking)) cuda::emulation::count_host_sync();
  cpu_backend().copy_across_devices(dst, src, non_blocking);
}

}  // namespace

const Backend* cuda_backend() {
  static const Backend emulated = [] {
    Backend b = cpu_backend();
    b.copy_across_devices = &emulated_copy_across_devices;
    return b;
  }();
  return cuda::emulated() ? &emulated : nullptr;
}

}  // namespace loom::kernels
