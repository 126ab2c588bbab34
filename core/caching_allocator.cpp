// The device-agnostic caching allocator (see Note [caching allocator design]).
#include "core/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>

#include "core/error.h"

namespace loom {

// A run of bytes inside a segment. The blocks of one segment form a doubly linked list
// in address order; the segment's first block has no prev.
struct CachingAllocatorCore::Block {
  char* ptr = nullptr;
  size_t size = 0;
  uintptr_t stream = 0;
  PoolId pool = 0;     // 0: the default pool (Note [private pools])
  bool small = false;  // which free list: small (<= 1 MiB) or large segments
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
};

bool CachingAllocatorCore::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->pool != b->pool) return a->pool < b->pool;
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

namespace {
// Larger requests cannot be rounded without overflow; no device has that much anyway.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;
}  // namespace

std::string format_bytes(size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = double(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return std::string(text) + " (" + std::to_string(bytes) + " bytes)";
}

CachingAllocatorCore::CachingAllocatorCore(RawMemory backend, CacheLimit cache_limit)
    : backend_(std::move(backend)), cache_limit_(std::move(cache_limit)) {}

CachingAllocatorCore::~CachingAllocatorCore() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_segments(/*every_pool=*/true);
}

size_t CachingAllocatorCore::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + kRound - 1) / kRound * kRound;
}

size_t CachingAllocatorCore::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

void* CachingAllocatorCore::allocate(size_t bytes, uintptr_t stream, size_t* block_size, PoolId pool) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  PoolStats* pool_stats = pool != 0 ? &live_pool(pool, "allocate") : nullptr;  // stable: the pool is live
  if (bytes > kMaxRequest) throw OutOfMemoryError(out_of_memory_message(bytes));
  const size_t size = round_size(bytes);
  const bool small = size <= kSmallRequest;
  FreeList& list = small ? small_free_ : large_free_;

  Block* block = take_free_block(list, pool, stream, size);
  if (!block) block = new_segment(bytes, size, stream, small, pool);
  split(block, size, list);
  block->allocated = true;
  live_.emplace(block->ptr, block);

  if (pool_stats) pool_stats->allocated += block->size;
  stats_.allocated += block->size;
  stats_.max_allocated = std::max(stats_.max_allocated, stats_.allocated);
  if (block_size) *block_size = block->size;
  return block->ptr;
}

CachingAllocatorCore::Block* CachingAllocatorCore::take_free_block(FreeList& list, PoolId pool, uintptr_t stream,
                                                                   size_t size) {
  Block key;
  key.pool = pool;
  key.stream = stream;
  key.size = size;
  auto it = list.lower_bound(&key);
  if (it == list.end() || (*it)->pool != pool || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  list.erase(it);
  return block;
}

CachingAllocatorCore::Block* CachingAllocatorCore::new_segment(size_t requested, size_t size,
                                                               uintptr_t stream, bool small, PoolId pool) {
  const size_t bytes = segment_size(size);
  void* ptr = backend_.alloc(bytes);
  const bool flush = backend_may_release();
  if (!ptr && flush) {
    // What the cache holds may be exactly what the device lacks.
    release_cached_segments();
    ptr = backend_.alloc(bytes);
  }
  if (!ptr)
    throw OutOfMemoryError(out_of_memory_message(requested) +
                           (flush ? "" : " (the cache could not be flushed: a CUDA graph is being captured)"));

  auto* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = bytes;
  block->stream = stream;
  block->pool = pool;
  block->small = small;
  if (pool != 0) {
    pools_[pool].reserved += bytes;
    ++pools_[pool].segments;
  }
  stats_.reserved += bytes;
  stats_.max_reserved = std::max(stats_.max_reserved, stats_.reserved);
  ++stats_.segments;
  return block;
}

// Keeps the first `size` bytes of `block` and returns the rest to `pool` when it is big
// enough to be worth a block of its own.
void CachingAllocatorCore::split(Block* block, size_t size, FreeList& pool) {
  const size_t rest = block->size - size;
  const bool worth_it = block->small ? rest >= kRound : rest > kSmallRequest;
  if (!worth_it) return;
  auto* tail = new Block;
  tail->ptr = block->ptr + size;
  tail->size = rest;
  tail->stream = block->stream;
  tail->pool = block->pool;
  tail->small = block->small;
  tail->prev = block;
  tail->next = block->next;
  if (block->next) block->next->prev = tail;
  block->next = tail;
  block->size = size;
  pool.insert(tail);
}

void CachingAllocatorCore::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  LOOM_CHECK(it != live_.end(), ValueError, "caching allocator: free(", ptr,
             "): not a block from this allocator, or already freed");
  Block* block = it->second;
  live_.erase(it);
  block->allocated = false;
  stats_.allocated -= block->size;
  if (block->pool != 0) pools_[block->pool].allocated -= block->size;

  // Merge with free neighbours. They leave the free list before their size changes: the
  // list is ordered by size.
  FreeList& list = block->small ? small_free_ : large_free_;
  if (Block* prev = block->prev; prev && !prev->allocated) {
    list.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next && !next->allocated) {
    list.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    delete next;
  }
  const auto inserted = list.insert(block).first;
  // The last block of a released pool's segment: the segment goes back (Note [private pools]).
  if (block->pool != 0 && pools_[block->pool].owners == 0 && !block->prev && !block->next && backend_may_release())
    release_segment(list, inserted);
  if (cache_limit_) trim_to_limit();
}

// Returns whole free segments, largest first, while the cache holds more than its limit.
// Only the large pool is trimmed: the small pool's 2 MiB segments are cheap to keep.
void CachingAllocatorCore::trim_to_limit() {
  if (!backend_may_release()) return;
  const size_t limit = cache_limit_(stats_);
  for (auto it = large_free_.end(); stats_.reserved - stats_.allocated > limit && it != large_free_.begin();) {
    --it;
    if ((*it)->prev || (*it)->next || !may_release((*it)->pool)) continue;
    it = release_segment(large_free_, it);
  }
}

// Gives a free block that is a whole segment back to the backend; returns the next block.
CachingAllocatorCore::FreeList::iterator CachingAllocatorCore::release_segment(FreeList& pool,
                                                                               FreeList::iterator it) {
  Block* block = *it;
  backend_.free(block->ptr, block->size);
  stats_.reserved -= block->size;
  --stats_.segments;
  if (block->pool != 0) {
    PoolStats& pool_stats = pools_[block->pool];
    pool_stats.reserved -= block->size;
    if (--pool_stats.segments == 0 && pool_stats.owners == 0) pools_.erase(block->pool);
  }
  const auto next = pool.erase(it);
  delete block;
  return next;
}

void CachingAllocatorCore::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (backend_may_release()) release_cached_segments();
}

bool CachingAllocatorCore::backend_may_release() const { return !backend_.may_release || backend_.may_release(); }

bool CachingAllocatorCore::may_release(PoolId pool) const {
  if (pool == 0) return true;
  auto it = pools_.find(pool);
  return it == pools_.end() || it->second.owners == 0;
}

// A free block with no neighbours is a whole segment with nothing live in it.
template <typename Which>
void CachingAllocatorCore::release_free_segments(const Which& which) {
  for (FreeList* list : {&small_free_, &large_free_})
    for (auto it = list->begin(); it != list->end();)
      it = (!(*it)->prev && !(*it)->next && which((*it)->pool)) ? release_segment(*list, it) : std::next(it);
}

void CachingAllocatorCore::release_cached_segments(bool every_pool) {
  release_free_segments([&](PoolId pool) { return every_pool || may_release(pool); });
}

PoolStats& CachingAllocatorCore::live_pool(PoolId pool, const char* call) {
  auto it = pools_.find(pool);
  LOOM_CHECK(it != pools_.end() && it->second.owners > 0, ValueError, "caching allocator: ", call, "(", pool,
             "): no such live private pool");
  return it->second;
}

PoolId CachingAllocatorCore::create_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  const PoolId pool = next_pool_++;
  pools_[pool].owners = 1;
  return pool;
}

void CachingAllocatorCore::retain_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++live_pool(pool, "retain_pool").owners;
}

void CachingAllocatorCore::release_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--live_pool(pool, "release_pool").owners > 0) return;
  // Its segments with nothing live go back now (or at the next empty_cache() when the
  // backend may not free now); the others when their last block is freed.
  if (backend_may_release()) release_free_segments([&](PoolId p) { return p == pool; });
  if (auto left = pools_.find(pool); left != pools_.end() && left->second.segments == 0) pools_.erase(left);
}

PoolStats CachingAllocatorCore::pool_stats(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  LOOM_CHECK(pool != 0 && pool < next_pool_, ValueError, "caching allocator: pool_stats(", pool,
             "): no such private pool");
  auto it = pools_.find(pool);
  return it == pools_.end() ? PoolStats{} : it->second;
}

CachingAllocatorStats CachingAllocatorCore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CachingAllocatorStats s = stats_;
  s.cached_blocks = small_free_.size() + large_free_.size();
  return s;
}

void CachingAllocatorCore::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.max_allocated = stats_.allocated;
  stats_.max_reserved = stats_.reserved;
}

std::string CachingAllocatorCore::out_of_memory_message(size_t requested) const {
  const size_t device_free = backend_.free_bytes ? backend_.free_bytes() : std::numeric_limits<size_t>::max();
  const std::string free_text = device_free == std::numeric_limits<size_t>::max()
                                    ? std::string()
                                    : ", " + format_bytes(device_free) + " free on the device";
  return detail::str(backend_.device, " out of memory: tried to allocate ", format_bytes(requested), "; ",
                     format_bytes(stats_.allocated), " allocated by Loom, ", format_bytes(stats_.reserved),
                     " reserved", free_text);
}

}  // namespace loom
