// How this copy of Loom was built.
#pragma once

namespace loom {

// True when Loom was compiled with its CUDA backend (LOOM_ENABLE_CUDA=ON and nvcc found;
// LOOM_WITH_CUDA is then defined for Loom and for everything that links it). Says
// nothing about whether a GPU is present at run time.
bool built_with_cuda();

// Defined only with the CUDA backend, in kernels/cuda/cuda_probe.cu: always true; its
// presence proves that the .cu files were compiled and linked into the library. Declared
// in every build, so that this header, which nearly every file includes, preprocesses the
// same with and without LOOM_WITH_CUDA: ccache then serves the CUDA build's copies of the
// CPU files from the CPU build's (.ci/run builds both).
bool cuda_compiled();

}  // namespace loom
