// Memory for storages. An Allocator hands out DataPtrs: owning pointers that know their
// device and how to free themselves. The CPU allocator aligns to 64 bytes (one cache
// line, one AVX-512 vector); the CUDA caching allocator plugs in through the same
// interface (set_allocator).
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace loom {

using DeleterFn = void (*)(void* ctx, void* ptr);

class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* ptr, void* ctx, DeleterFn deleter, Device device)
      : ptr_(ptr), ctx_(ctx), deleter_(deleter), device_(device) {}
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  DataPtr(DataPtr&& o) noexcept { *this = std::move(o); }
  DataPtr& operator=(DataPtr&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_; ctx_ = o.ctx_; deleter_ = o.deleter_; device_ = o.device_;
      o.ptr_ = nullptr; o.ctx_ = nullptr; o.deleter_ = nullptr;
    }
    return *this;
  }
  ~DataPtr() { reset(); }

  void* get() const { return ptr_; }
  Device device() const { return device_; }

 private:
  void reset() {
    if (deleter_ && ptr_) deleter_(ctx_, ptr_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  void* ctx_ = nullptr;
  DeleterFn deleter_ = nullptr;
  Device device_ = kCPU;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes, Device device) = 0;
};

// The allocator used for new storages on a device type. Thread-safe to call.
Allocator* get_allocator(DeviceType type);
// Installs an allocator for a device type, in place of the CUDA device's own below (tests;
// the host-emulated device's guard).
void set_allocator(DeviceType type, Allocator* allocator);

// What the CUDA device provides, from whichever file the build compiles (as the device API
// of core/cuda.h): kernels/cuda/cuda_allocator.cpp with the CUDA backend, core/cuda_stub.cpp
// without it. There the device allocator is the host-emulated device's while emulation is
// on (core/cuda_emulation.h) and null otherwise, and there is no pinned memory.
namespace cuda::detail {
Allocator* device_allocator();           // DeviceType::CUDA's, unless set_allocator installed one
Allocator* pinned_allocator();           // page-locked host memory (Tensor::pin_memory), or null
bool is_pinned(const void* ptr);         // ptr is a block of pinned_allocator()
}  // namespace cuda::detail

}  // namespace loom
