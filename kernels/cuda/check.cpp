// The throwing half of kernels/cuda/check.h: turns a failed CUDA runtime, cuBLAS or cuDNN
// status into the right Loom exception, with the failing call, where it was made and the
// library's own name and description of the error.
#include "kernels/cuda/check.h"

#include <cublas_api.h>
#include <cuda_runtime.h>
#ifdef LOOM_WITH_CUDNN  // cuDNN is optional (CMakeLists.txt): its header may be absent
#include <cudnn.h>
#endif

namespace loom::cuda::detail {

namespace {

std::string describe(const char* call, const char* func, const char* file, int line, const char* name,
                     const char* text) {
  return loom::detail::str(call, " failed in ", func, " (", file, ":", line, "): ", name, ": ", text);
}

}  // namespace

void throw_cuda_error(int status, const char* call, const char* func, const char* file, int line) {
  const auto error = static_cast<cudaError_t>(status);
  // Clear the runtime's record of a non-sticky error, so that the next check (say,
  // LOOM_CUDA_KERNEL_CHECK after an unrelated launch) does not report it again. Sticky
  // errors (a kernel fault) cannot be cleared and keep failing every call, as they should.
  (void)cudaGetLastError();
  const std::string message = describe(call, func, file, line, cudaGetErrorName(error), cudaGetErrorString(error));
  switch (error) {
    case cudaErrorMemoryAllocation: throw OutOfMemoryError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable: throw DeviceError(message);
    default: throw CudaError(message);
  }
}

void throw_cublas_error(int status, const char* call, const char* func, const char* file, int line) {
  const auto error = static_cast<cublasStatus_t>(status);
  const std::string message =
      describe(call, func, file, line, cublasGetStatusName(error), cublasGetStatusString(error));
  if (error == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(message);
  throw CudaError(message);
}

void throw_cudnn_error(int status, const char* call, const char* func, const char* file, int line) {
  const std::string code = "cuDNN status " + std::to_string(status);
#ifdef LOOM_WITH_CUDNN
  const auto error = static_cast<cudnnStatus_t>(status);
  const std::string message = describe(call, func, file, line, code.c_str(), cudnnGetErrorString(error));
  if (error == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) throw OutOfMemoryError(message);
#else
  const std::string message = describe(call, func, file, line, code.c_str(), "(Loom was built without cuDNN)");
#endif
  throw CudaError(message);
}

}  // namespace loom::cuda::detail
