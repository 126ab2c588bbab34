// The device check every kernel entry point makes of its operands, on the CPU and CUDA
// backends alike: a kernel handed tensors on two devices would read one of them through a
// pointer it cannot use.
#pragma once

#include "core/error.h"
#include "core/tensor.h"

namespace loom::kernels {

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  LOOM_CHECK(a.device() == b.device(), DeviceError, op, ": expected tensors on one device, got ", a.device(),
             " and ", b.device());
}

}  // namespace loom::kernels
