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
// - Private pools (Note [private pools]) keep a CUDA graph's memory apart from everything
//   else.
// Stats count rounded block sizes (what the allocator really set aside), as PyTorch does.
// All members are thread-safe (one mutex).
//
// Note [private pools]
// A captured CUDA graph replays its kernels on the very addresses they were captured with,
// so the blocks allocated while capturing must never be handed to anyone else, not even
// after their tensors are freed: a freed block is still the graph's scratch space on the
// next replay. As PyTorch's allocator does, such blocks come from a private pool
// (create_pool(), then allocate(..., pool)): its segments serve only allocations into that
// pool, are never returned by empty_cache() or the out-of-memory flush while the pool
// lives, and are counted in the device's totals. Graphs may share one pool (retain_pool():
// graphs replayed in capture order can reuse each other's scratch space). When the last
// owner releases it (release_pool()), its segments with nothing live go back to the
// backend at once, and the rest as soon as their last block is freed.
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
  // Whether segments may go back to the device now (null: always). False while a CUDA
  // graph is being captured, where cudaFree would break the capture: the out-of-memory
  // flush is then skipped.
  std::function<bool()> may_release;
};

// A private pool (Note [private pools]); 0 is the shared default pool.
using PoolId = uint64_t;

struct PoolStats {
  size_t allocated = 0;  // bytes in the pool's live blocks
  size_t reserved = 0;   // bytes in its segments
  size_t segments = 0;
  int owners = 0;        // create_pool() + retain_pool() - release_pool(); 0 once released
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
  // `pool`: 0 for the default pool, or a live private pool (ValueError otherwise).
  void* allocate(size_t bytes, uintptr_t stream, size_t* block_size = nullptr, PoolId pool = 0);
  // Returns a block from allocate() to the cache (nullptr: nothing). Throws ValueError for
  // a pointer this allocator did not hand out or that was already freed.
  void free(void* ptr);
  // Returns every segment with no live block to the backend, but a live private pool's.
  void empty_cache();

  // Private pools (Note [private pools]). create_pool() makes one with one owner;
  // retain_pool() adds an owner, release_pool() drops one (ValueError for a pool that is
  // not alive). pool_stats() of a released pool counts what is still live in it.
  PoolId create_pool();
  void retain_pool(PoolId pool);
  void release_pool(PoolId pool);
  PoolStats pool_stats(PoolId pool) const;

  CachingAllocatorStats stats() const;
  void reset_peak_stats();  // the peaks become the current values

  static size_t round_size(size_t bytes);        // bytes (>= 1) rounded up to kRound
  static size_t segment_size(size_t rounded);    // the segment a fresh block of this size gets

 private:
  struct Block;
  // Free-list order: pool, stream, then size, then address, so lower_bound({pool,
  // stream, size}) is the best fit in that pool on that stream.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeList = std::set<Block*, BlockOrder>;

  Block* take_free_block(FreeList& list, PoolId pool, uintptr_t stream, size_t size);
  Block* new_segment(size_t requested, size_t size, uintptr_t stream, bool small, PoolId pool);
  void split(Block* block, size_t size, FreeList& pool);
  void release_cached_segments(bool every_pool = false);
  // Returns every cached whole free segment whose pool `which(pool)` accepts.
  template <typename Which>
  void release_free_segments(const Which& which);
  // The stats of a private pool that still has owners; ValueError naming `call` otherwise.
  PoolStats& live_pool(PoolId pool, const char* call);
  bool may_release(PoolId pool) const;  // the pool's free segments may go back
  bool backend_may_release() const;      // RawMemory::may_release, true when unset
  void trim_to_limit();
  FreeList::iterator release_segment(FreeList& pool, FreeList::iterator it);
  std::string out_of_memory_message(size_t requested) const;

  mutable std::mutex mutex_;
  RawMemory backend_;
  CacheLimit cache_limit_;
  FreeList small_free_, large_free_;
  std::unordered_map<void*, Block*> live_;  // by pointer: what free() looks up
  CachingAllocatorStats stats_;
  std::unordered_map<PoolId, PoolStats> pools_;  // private pools, alive or with blocks left
  PoolId next_pool_ = 1;
};

// "1.50 MiB (1572864 bytes)"; below 1 KiB just "300 bytes". For memory messages.
std::string format_bytes(size_t bytes);

}  // namespace loom
