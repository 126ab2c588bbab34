// The caching allocator's logic, independent of any device: it carves blocks out of big
// segments obtained from a backend (cudaMalloc in kernels/cuda/cuda_allocator.cpp, a fake
// in tests/test_caching_allocator.cpp) and keeps freed blocks for reuse, so a training
// step's allocations stop reaching the driver after the first step.
//
// Note [caching allocator design]
// The design follows PyTorch's CUDA caching allocator:
// - Requests are rounded up to 512 bytes. Those of at most 1 MiB come from the small pool,
//   whose segments are 2 MiB; larger ones from the large pool, whose segments are 20 MiB
//   for requests under 10 MiB (several share one) and the request rounded up to 2 MiB
//   otherwise.
// - A free block is found by best fit: the smallest cached block of the request's pool and
//   stream that is big enough (lowest address among equals). What it has beyond the request
//   is split off as a new free block when that remainder is worth keeping (small pool:
//   at least 512 bytes; large pool: more than 1 MiB); otherwise the caller gets it all.
// - A freed block merges with free neighbours of its segment, so a segment whose blocks are
//   all free is one block again and can be returned by empty_cache().
// - Blocks belong to the stream that was current when they were allocated and are only
//   reused for that stream: work queued on one stream is ordered, so a block freed while a
//   kernel still uses it is safe to hand out again on that stream. Using a block on another
//   stream (PyTorch's record_stream) is not supported; the user must synchronize.
// - When the backend is out of memory, all cached segments with no live block are returned
//   and the request retried once; a second failure throws OutOfMemoryError with the
//   request, Loom's books and what the device has left.
// - A cache limit, when given (the CPU's; the CUDA device has none, as PyTorch's), bounds
//   the free bytes kept: a free() that leaves more cached than the limit returns whole free
//   segments, largest first, to the backend until the cache is within it.
// Stats count rounded block sizes (what the allocator really set aside), as PyTorch does.
// All members are thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace loom {

// Where segments come from.
struct RawMemory {
  std::function<void*(size_t)> alloc;   // nullptr when the device is out of memory
  std::function<void(void*, size_t)> free;  // a segment from alloc, and its size
  std::function<size_t()> free_bytes;   // what the device has left (for the OOM message); SIZE_MAX if unknown
  std::string device = "CUDA";          // for messages: "CUDA out of memory: ..."
};

struct CachingAllocatorStats {
  size_t allocated = 0;      // bytes in live blocks
  size_t max_allocated = 0;  // peak of allocated since construction or reset_peak_stats()
  size_t reserved = 0;       // bytes in segments held from the backend (live + cached)
  size_t max_reserved = 0;
  size_t segments = 0;       // segments held from the backend
  size_t cached_blocks = 0;  // free blocks waiting for reuse
};

// The most free bytes the cache may keep, given the current books; null: no limit.
using CacheLimit = std::function<size_t(const CachingAllocatorStats&)>;

class CachingAllocatorCore {
 public:
  static constexpr size_t kRound = 512;                   // every size is a multiple of this
  static constexpr size_t kSmallRequest = size_t(1) << 20;  // up to this: the small pool
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kLargeSegment = size_t(20) << 20;  // for requests under kMinLargeAlloc
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;
  static constexpr size_t kRoundLarge = size_t(2) << 20;

  explicit CachingAllocatorCore(RawMemory backend, CacheLimit cache_limit = nullptr);
  // Returns the cached segments; segments that still hold live blocks are left alone.
  ~CachingAllocatorCore();
  CachingAllocatorCore(const CachingAllocatorCore&) = delete;
  CachingAllocatorCore& operator=(const CachingAllocatorCore&) = delete;

  // A block of at least `bytes` for use on `stream` (an opaque id, e.g. a cudaStream_t).
  // nullptr for 0 bytes. Throws OutOfMemoryError when the backend cannot provide it.
  // *block_size, when given, receives the size the block was booked at (stats()).
  void* allocate(size_t bytes, uintptr_t stream, size_t* block_size = nullptr);
  // Returns a block from allocate() to the cache (nullptr: nothing). Throws ValueError for
  // a pointer this allocator did not hand out or that was already freed.
  void free(void* ptr);
  // Returns every segment with no live block to the backend.
  void empty_cache();

  CachingAllocatorStats stats() const;
  void reset_peak_stats();  // the peaks become the current values

  static size_t round_size(size_t bytes);        // bytes (>= 1) rounded up to kRound
  static size_t segment_size(size_t rounded);    // the segment a fresh block of this size gets

 private:
  struct Block;
  // Free-list order: stream, then size, then address, so lower_bound({stream, size}) is
  // the best fit on that stream.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeList = std::set<Block*, BlockOrder>;

  Block* take_free_block(FreeList& pool, uintptr_t stream, size_t size);
  Block* new_segment(size_t requested, size_t size, uintptr_t stream, bool small);
  void split(Block* block, size_t size, FreeList& pool);
  void release_cached_segments();
  void trim_to_limit();
  FreeList::iterator release_segment(FreeList& pool, FreeList::iterator it);
  std::string out_of_memory_message(size_t requested) const;

  mutable std::mutex mutex_;
  RawMemory backend_;
  CacheLimit cache_limit_;
  FreeList small_free_, large_free_;
  std::unordered_map<void*, Block*> live_;  // by pointer: what free() looks up
  CachingAllocatorStats stats_;
};

// "1.50 MiB (1572864 bytes)"; below 1 KiB just "300 bytes". For memory messages.
std::string format_bytes(size_t bytes);

}  // namespace loom
