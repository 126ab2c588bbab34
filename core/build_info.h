// How this copy of Loom was built.
#pragma once

namespace loom {

// True when Loom was compiled with its CUDA backend (LOOM_ENABLE_CUDA=ON and nvcc found;
// LOOM_WITH_CUDA is then defined for Loom and for everything that links it). Says
// nothing about whether a GPU is present at run time.
bool built_with_cuda();

#ifdef LOOM_WITH_CUDA
// Defined in kernels/cuda/cuda_probe.cu: always true; its presence proves that the .cu
// files were compiled and linked into the library.
bool cuda_compiled();
#endif

}  // namespace loom
