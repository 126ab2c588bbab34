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
// Installs an allocator for a device type (the CUDA backend registers its own).
void set_allocator(DeviceType type, Allocator* allocator);

}  // namespace loom
