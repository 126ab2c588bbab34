// Scratch and packed-operand storage that only grows (the bfloat16 GEMM's packing, oneDNN's
// packed weights and scratchpads).
#pragma once

#include <cstddef>
#include <memory>

namespace loom::kernels::cpu {

// Uninitialised storage that only grows: packing into it again at a recurring size
// allocates nothing (fresh pages cost as much as the packing itself).
template <typename T>
class GrowingBuffer {
 public:
  T* reserve(size_t n) {
    if (n > capacity_) {
      data_.reset(new T[n]);
      capacity_ = n;
    }
    return data_.get();
  }
  const T* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

// 64 bytes on a 64-byte boundary: GrowingBuffer<CacheLine> is byte storage aligned as oneDNN
// allocates its own (its kernels load packed weights a cache line at a time).
struct alignas(64) CacheLine {
  std::byte bytes[64];
};

inline size_t cache_lines_for(size_t bytes) { return (bytes + sizeof(CacheLine) - 1) / sizeof(CacheLine); }

}  // namespace loom::kernels::cpu
