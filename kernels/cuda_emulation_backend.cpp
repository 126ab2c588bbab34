// The CUDA backend of a build without it (compiled only then; CMakeLists.txt): the CPU
// table while the host-emulated cuda:0 is on (core/cuda_emulation.h), whose tensors live
// in host memory; no backend otherwise, so kernels on cuda:0 say Loom was built without
// CUDA support.
#include "core/cuda_emulation.h"
#include "kernels/backend.h"

namespace loom::kernels {

const Backend* cuda_backend() { return cuda::emulated() ? &cpu_backend() : nullptr; }

}  // namespace loom::kernels
