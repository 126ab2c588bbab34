#include "core/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>

#include "core/caching_allocator.h"
#include "core/cuda.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/storage.h"

namespace loom {
namespace {

// 64-byte alignment: one cache line, one AVX-512 register.
constexpr size_t kCpuAlignment = 64;
constexpr size_t kSmallBytes = 256;

// Note [CPU block cache]
// Large buffers (activations, gradients: megabytes each, allocated and freed every training
// step) would come from mmap in glibc, so every step would page-fault them in afresh — 11%
// of an LSTM training step. Requests over kCacheMin bytes therefore go to a caching
// allocator (core/caching_allocator.h, the CUDA device's design): blocks are rounded to
// 512 bytes and carved from mmap'ed segments (20 MiB shared by requests under 10 MiB, the
// request rounded to 2 MiB above), best fit, split, and merged with free neighbours when
// freed. The cache may keep twice as many free bytes as the live peak of those blocks (at
// least kCacheFloor): a training step then finds its blocks again, while a workload that
// shrinks or changes its sizes hands back whole segments (a segment's untouched pages cost
// no RSS). Twice, not once: at the end of a step nearly every block is free, so the cache
// holds the peak plus what fragmentation added (a third more in an LSTM step under bf16
// autocast); a limit of the peak itself gave back a segment after every step and took it
// from the system again in the next, 17,000 page faults and 15% of lstm-sentiment's step.
// loom::empty_cache() returns every free segment. Smaller requests go straight to malloc,
// which already reuses them well.
constexpr size_t kCacheMin = size_t(1) << 20;
constexpr size_t kCacheFloor = size_t(32) << 20;

// A byte count and its high-water mark, updated without a lock.
class Gauge {
 public:
  void add(size_t n) {
    const size_t now = now_.fetch_add(n, std::memory_order_relaxed) + n;
    size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void sub(size_t n) { now_.fetch_sub(n, std::memory_order_relaxed); }
  size_t now() const { return now_.load(std::memory_order_relaxed); }
  size_t peak() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(now(), std::memory_order_relaxed); }

 private:
  std::atomic<size_t> now_{0}, peak_{0};
};

// The CPU's books (core/memory.h): bytes in live storages, and bytes held from the system.
Gauge& allocated_bytes() {
  static Gauge* gauge = new Gauge;  // never destroyed: see block_cache()
  return *gauge;
}
Gauge& reserved_bytes() {
  static Gauge* gauge = new Gauge;
  return *gauge;
}

// Never destroyed: tensors held in static objects may be freed after main returns.
CachingAllocatorCore& block_cache() {
  static CachingAllocatorCore* cache = new CachingAllocatorCore(
      RawMemory{
          [](size_t bytes) -> void* {
            void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) return nullptr;
            reserved_bytes().add(bytes);
            return p;
          },
          [](void* p, size_t bytes) {
            munmap(p, bytes);
            reserved_bytes().sub(bytes);
          },
          nullptr, "CPU"},
      [](const CachingAllocatorStats& s) { return std::max(2 * s.max_allocated, kCacheFloor); });
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
    if (nbytes > kCacheMin) {
      // Throws OutOfMemoryError itself, naming the request and the cache's books.
      size_t booked = 0;
      void* p = block_cache().allocate(nbytes, 0, &booked);
      allocated_bytes().add(booked);
      // The booked size travels in the deleter's context.
      return DataPtr(p, reinterpret_cast<void*>(booked),
                     [](void* ctx, void* ptr) {
                       allocated_bytes().sub(reinterpret_cast<size_t>(ctx));
                       block_cache().free(ptr);
                     },
                     device);
    }
    // Tiny buffers (scalars, small vectors) skip the slower aligned path: malloc's 16-byte
    // alignment is all their loops can use.
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = nbytes <= kSmallBytes ? std::malloc(nbytes) : std::aligned_alloc(kCpuAlignment, rounded);
    if (!p) out_of_memory(nbytes, device);
    allocated_bytes().add(rounded);
    reserved_bytes().add(rounded);
    return DataPtr(p, reinterpret_cast<void*>(rounded),
                   [](void* ctx, void* ptr) {
                     allocated_bytes().sub(reinterpret_cast<size_t>(ctx));
                     reserved_bytes().sub(reinterpret_cast<size_t>(ctx));
                     std::free(ptr);
                   },
                   device);
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

namespace cpu {
size_t memory_allocated() { return allocated_bytes().now(); }
size_t max_memory_allocated() { return allocated_bytes().peak(); }
size_t memory_reserved() { return reserved_bytes().now(); }
size_t max_memory_reserved() { return reserved_bytes().peak(); }
void reset_peak_memory_stats() {
  allocated_bytes().reset_peak();
  reserved_bytes().reset_peak();
  block_cache().reset_peak_stats();  // the cache's limit follows the live peak from here
}
void empty_cache() { block_cache().empty_cache(); }
}  // namespace cpu

void empty_cache() {
  cpu::empty_cache();
  cuda::empty_cache();
}

Storage make_storage(size_t nbytes, Device device) {
  Allocator* a = get_allocator(device.type);
  LOOM_CHECK(a != nullptr, DeviceError, "cannot allocate on ", device,
             ": Loom was built without CUDA support (configure with the 'cuda' preset)");
  return std::make_shared<StorageImpl>(a->allocate(nbytes, device), nbytes);
}

}  // namespace loom
