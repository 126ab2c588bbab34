// One checking macro family for every CUDA runtime, cuBLAS and cuDNN call and every kernel
// launch. A failure throws with the call's text, the function, file and line, and the
// library's own description of the error:
//
//   LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, stream));
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   LOOM_CUDA_KERNEL_CHECK();  // launch errors (bad configuration, no kernel image)
//
// Out-of-memory from the runtime becomes OutOfMemoryError; a missing or unusable device
// becomes DeviceError; everything else is a loom::Error of type CudaError.
#pragma once

#include <string>

#include "core/error.h"

namespace loom {

class CudaError : public Error {
  using Error::Error;
};

namespace cuda::detail {
// Throw the right error type for a failed call; `status` is the library's status code.
[[noreturn]] void throw_cuda_error(int status, const char* call, const char* func, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* func, const char* file, int line);
[[noreturn]] void throw_cudnn_error(int status, const char* call, const char* func, const char* file, int line);
}  // namespace cuda::detail

}  // namespace loom

#define LOOM_CUDA_CHECK(call)                                                                    \
  do {                                                                                           \
    const int loom_status_ = static_cast<int>(call);                                             \
    if (loom_status_ != 0) [[unlikely]]                                                          \
      ::loom::cuda::detail::throw_cuda_error(loom_status_, #call, __func__, __FILE__, __LINE__); \
  } while (0)

#define LOOM_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                             \
    const int loom_status_ = static_cast<int>(call);                                               \
    if (loom_status_ != 0) [[unlikely]]                                                            \
      ::loom::cuda::detail::throw_cublas_error(loom_status_, #call, __func__, __FILE__, __LINE__); \
  } while (0)

#define LOOM_CUDNN_CHECK(call)                                                                    \
  do {                                                                                            \
    const int loom_status_ = static_cast<int>(call);                                              \
    if (loom_status_ != 0) [[unlikely]]                                                           \
      ::loom::cuda::detail::throw_cudnn_error(loom_status_, #call, __func__, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: reports launch-configuration errors at the launch site.
#define LOOM_CUDA_KERNEL_CHECK() LOOM_CUDA_CHECK(cudaGetLastError())
