#include "core/allocator.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/storage.h"

namespace loom {
namespace {

// 64-byte alignment: one cache line, one AVX-512 register.
constexpr size_t kCpuAlignment = 64;
constexpr size_t kSmallBytes = 256;

// Note [CPU block cache]
// Large buffers (activations, gradients: megabytes each, allocated and freed every training
// step) come from mmap in glibc, so every step would page-fault them in afresh — 11% of an
// LSTM training step. Blocks of at least kCacheMin bytes are therefore kept on free lists
// (by size, rounded up to kCacheGranule) and reused, up to kCacheMax cached bytes; smaller
// ones go straight to malloc, which already reuses them well.
constexpr size_t kCacheMin = size_t(1) << 20;
constexpr size_t kCacheGranule = size_t(1) << 16;
constexpr size_t kCacheMax = size_t(1) << 30;

class BlockCache {
 public:
  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= bytes;
        return p;
      }
    }
    return std::aligned_alloc(kCpuAlignment, bytes);
  }
  void give_back(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + bytes > kCacheMax) {
      std::free(p);
      return;
    }
    free_.emplace(bytes, p);
    cached_ += bytes;
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};

// Never destroyed: tensors held in static objects may be freed after main returns.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

[[noreturn]] void out_of_memory(size_t nbytes, Device device) {
  throw OutOfMemoryError(detail::str("out of memory: cannot allocate ", nbytes, " bytes (", double(nbytes) / (1 << 20),
                                     " MiB) on ", device));
}

class CPUAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_ASSERT(device.is_cpu());
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);
    // No request this large can succeed, and rounding it up below would wrap.
    if (nbytes > std::numeric_limits<size_t>::max() / 2) out_of_memory(nbytes, device);
    if (nbytes >= kCacheMin) {
      const size_t rounded = (nbytes + kCacheGranule - 1) / kCacheGranule * kCacheGranule;
      void* p = block_cache().take(rounded);
      if (!p) out_of_memory(nbytes, device);
      // The block's size travels in the deleter's context.
      return DataPtr(p, reinterpret_cast<void*>(rounded),
                     [](void* ctx, void* ptr) { block_cache().give_back(ptr, reinterpret_cast<size_t>(ctx)); },
                     device);
    }
    // Tiny buffers (scalars, small vectors) skip the slower aligned path: malloc's 16-byte
    // alignment is all their loops can use.
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = nbytes <= kSmallBytes ? std::malloc(nbytes) : std::aligned_alloc(kCpuAlignment, rounded);
    if (!p) out_of_memory(nbytes, device);
    return DataPtr(p, nullptr, [](void*, void* ptr) { std::free(ptr); }, device);
  }
};

CPUAllocator cpu_allocator;
std::array<std::atomic<Allocator*>, 2> allocators{&cpu_allocator, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) {
  Allocator* allocator = allocators[size_t(type)].load();
  // Asked for here rather than registered by a static initializer: a static libloom would
  // drop an object file that nothing references, and its registration with it.
  if (!allocator && type == DeviceType::CUDA) allocator = cuda::detail::device_allocator();
  return allocator;
}

void set_allocator(DeviceType type, Allocator* allocator) { allocators[size_t(type)].store(allocator); }

Storage make_storage(size_t nbytes, Device device) {
  Allocator* a = get_allocator(device.type);
  LOOM_CHECK(a != nullptr, DeviceError, "cannot allocate on ", device,
             ": Loom was built without CUDA support (configure with the 'cuda' preset)");
  return std::make_shared<StorageImpl>(a->allocate(nbytes, device), nbytes);
}

}  // namespace loom
