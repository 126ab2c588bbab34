// The bytes behind one or more tensors. Views share a Storage through a shared_ptr;
// the memory is freed when the last tensor using it goes.
#pragma once

#include <cstddef>
#include <memory>

#include "core/allocator.h"
#include "core/profiler.h"

namespace loom {

class StorageImpl {
 public:
  StorageImpl(DataPtr data, size_t nbytes) : data_(std::move(data)), nbytes_(nbytes) {
    if (profiler::is_recording_memory() && data_.get()) profiler::record_memory(data_.get(), int64_t(nbytes_), data_.device());
  }
  ~StorageImpl() {
    if (profiler::is_recording_memory() && data_.get()) {
      const void* addr = data();
      const Device where = device();
      data_ = DataPtr();  // freed first, so the record's total counts it out
      profiler::record_memory(addr, -int64_t(nbytes_), where);
    }
  }
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }

 private:
  DataPtr data_;
  size_t nbytes_;
};

using Storage = std::shared_ptr<StorageImpl>;

// Allocates `nbytes` on `device` with the device's registered allocator.
Storage make_storage(size_t nbytes, Device device);

}  // namespace loom
