// The caching allocator's logic (core/caching_allocator.h) on the CPU, against a fake
// device: segments come from malloc, the fake counts every backend call and can be given a
// capacity to run out of memory on demand.
#include "catch2_compat.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "core/caching_allocator.h"
#include "core/error.h"

using namespace loom;

namespace {

constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;

struct FakeDevice {
  size_t capacity = size_t(1) << 40;  // never touched: malloc'ed segments are mapped lazily
  size_t used = 0;
  std::map<char*, size_t> segments;
  std::vector<size_t> alloc_sizes;    // successful backend allocations, in order
  int failed_allocs = 0;
  int frees = 0;
  int bad_frees = 0;                  // frees of something that is not a segment

  // The allocator calls the backend under its own lock, so no locking here (and no Catch
  // assertions: the calls may come from other threads).
  RawMemory backend() {
    return RawMemory{
        [this](size_t n) -> void* {
          if (used + n > capacity) {
            ++failed_allocs;
            return nullptr;
          }
          auto* p = static_cast<char*>(std::malloc(n));
          if (!p) throw std::bad_alloc();
          segments[p] = n;
          used += n;
          alloc_sizes.push_back(n);
          return p;
        },
        [this](void* p, size_t n) {
          auto it = segments.find(static_cast<char*>(p));
          if (it == segments.end() || it->second != n) {  // only whole segments may come back
            ++bad_frees;
            return;
          }
          used -= it->second;
          segments.erase(it);
          std::free(p);
          ++frees;
        },
        [this] { return capacity - used; }};
  }
};

char* ch(void* p) { return static_cast<char*>(p); }

}  // namespace

TEST_CASE("caching allocator: sizes round to 512 bytes and pick the segment size", "[allocator]") {
  REQUIRE(CachingAllocatorCore::round_size(0) == 512);
  REQUIRE(CachingAllocatorCore::round_size(1) == 512);
  REQUIRE(CachingAllocatorCore::round_size(512) == 512);
  REQUIRE(CachingAllocatorCore::round_size(513) == 1024);
  REQUIRE(CachingAllocatorCore::segment_size(512) == 2 * MiB);
  REQUIRE(CachingAllocatorCore::segment_size(1 * MiB) == 2 * MiB);
  REQUIRE(CachingAllocatorCore::segment_size(1 * MiB + 512) == 20 * MiB);
  REQUIRE(CachingAllocatorCore::segment_size(10 * MiB - 512) == 20 * MiB);
  REQUIRE(CachingAllocatorCore::segment_size(10 * MiB) == 10 * MiB);
  REQUIRE(CachingAllocatorCore::segment_size(10 * MiB + 512) == 12 * MiB);

  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  REQUIRE(a.allocate(0, 0) == nullptr);
  REQUIRE_NOTHROW(a.free(nullptr));
  REQUIRE(dev.alloc_sizes.empty());

  void* p = a.allocate(1, 0);
  void* q = a.allocate(513, 0);
  REQUIRE(a.stats().allocated == 512 + 1024);
  REQUIRE(ch(q) == ch(p) + 512);  // carved from the same segment, back to back
  void* big = a.allocate(11 * MiB + 1, 0);
  REQUIRE(dev.alloc_sizes == std::vector<size_t>{2 * MiB, 12 * MiB});
  // The 1 MiB - 512 left in that segment is too little to split off: the block has it all.
  REQUIRE(a.stats().allocated == 512 + 1024 + 12 * MiB);
  for (void* x : {p, q, big}) a.free(x);
}

TEST_CASE("caching allocator: small and large requests never share a pool", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  void* small = a.allocate(1 * MiB, 0);  // the largest small request
  a.free(small);
  // 2 MiB are cached in the small pool, yet a 1.5 MiB request is large: a new 20 MiB segment.
  void* large = a.allocate(1 * MiB + 512 * KiB, 0);
  REQUIRE(dev.alloc_sizes == std::vector<size_t>{2 * MiB, 20 * MiB});
  a.free(large);
  // And the other way: 20 MiB cached in the large pool do not serve 4 KiB.
  void* tiny = a.allocate(4 * KiB, 0);
  REQUIRE(ch(tiny) == ch(small));
  REQUIRE(dev.alloc_sizes.size() == 2);
  a.free(tiny);
  // A mid-size large request splits its 20 MiB segment; the rest serves the next one.
  void* l1 = a.allocate(4 * MiB, 0);
  void* l2 = a.allocate(8 * MiB, 0);
  REQUIRE(ch(l2) == ch(l1) + 4 * MiB);
  REQUIRE(dev.alloc_sizes.size() == 2);
  a.free(l1);
  a.free(l2);
}

TEST_CASE("caching allocator: blocks split, and freed neighbours merge for reuse", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  void* A = a.allocate(256 * KiB, 0);
  void* B = a.allocate(256 * KiB, 0);
  void* C = a.allocate(256 * KiB, 0);
  REQUIRE(dev.alloc_sizes.size() == 1);
  REQUIRE(ch(B) == ch(A) + 256 * KiB);
  REQUIRE(ch(C) == ch(B) + 256 * KiB);
  REQUIRE(a.stats().cached_blocks == 1);  // the segment's tail

  a.free(B);
  REQUIRE(a.stats().cached_blocks == 2);  // B, the tail (C separates them)
  a.free(A);
  REQUIRE(a.stats().cached_blocks == 2);  // A+B merged, the tail

  // One merged block of A+B's size: reused exactly, with no new segment.
  void* AB = a.allocate(512 * KiB, 0);
  REQUIRE(AB == A);
  REQUIRE(dev.alloc_sizes.size() == 1);
  REQUIRE(a.stats().cached_blocks == 1);

  a.free(AB);
  a.free(C);  // merges with A+B on its left and the tail on its right: the whole segment
  REQUIRE(a.stats().cached_blocks == 1);
  void* whole = a.allocate(2 * MiB, 0);  // too big for the small pool: a large segment...
  REQUIRE(dev.alloc_sizes.size() == 2);
  a.free(whole);
  void* again = a.allocate(1 * MiB, 0);  // ...but the merged small segment serves 1 MiB
  REQUIRE(again == A);
  a.free(again);
}

TEST_CASE("caching allocator: a large block keeps a remainder only above 1 MiB", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  void* big = a.allocate(19 * MiB + 512 * KiB, 0);  // 20 MiB segment, 0.5 MiB left over
  REQUIRE(a.stats().cached_blocks == 0);           // not split: the caller holds all 20 MiB
  REQUIRE(a.stats().allocated == 20 * MiB);
  a.free(big);
  void* p = a.allocate(18 * MiB, 0);  // 2 MiB left over: split
  REQUIRE(a.stats().cached_blocks == 1);
  REQUIRE(a.stats().allocated == 18 * MiB);
  a.free(p);
}

TEST_CASE("caching allocator: best fit picks the smallest free block that is big enough", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  // One small segment: X1 (256K) s X2 (128K) s X3 (512K) s, then the tail; the live
  // separators s keep the freed X blocks apart.
  void* x1 = a.allocate(256 * KiB, 0);
  void* s1 = a.allocate(64 * KiB, 0);
  void* x2 = a.allocate(128 * KiB, 0);
  void* s2 = a.allocate(64 * KiB, 0);
  void* x3 = a.allocate(512 * KiB, 0);
  void* s3 = a.allocate(64 * KiB, 0);
  a.free(x1);
  a.free(x2);
  a.free(x3);
  REQUIRE(a.stats().cached_blocks == 4);  // the tail is 960K
  REQUIRE(a.allocate(100 * KiB, 0) == x2);
  REQUIRE(a.allocate(200 * KiB, 0) == x1);
  REQUIRE(a.allocate(300 * KiB, 0) == x3);
  REQUIRE(dev.alloc_sizes.size() == 1);
  // The three best-fit blocks were split: x2 kept 28K, x1 56K, x3 212K beyond the requests.
  REQUIRE(a.stats().allocated == 100 * KiB + 200 * KiB + 300 * KiB + 3 * 64 * KiB);
  REQUIRE(a.stats().cached_blocks == 4);
  void* d1 = a.allocate(28 * KiB, 0);  // an exact fit: what x2 kept
  REQUIRE(d1 == ch(x2) + 100 * KiB);
  for (void* p : {x1, x2, x3, d1, s1, s2, s3}) a.free(p);
  REQUIRE(a.stats().allocated == 0);
  REQUIRE(a.stats().cached_blocks == 1);  // all merged back into one segment

  // Among equal sizes the lowest address wins, whichever was freed last.
  CachingAllocatorCore b(dev.backend());
  void* e1 = b.allocate(64 * KiB, 0);
  void* t1 = b.allocate(1 * KiB, 0);
  void* e2 = b.allocate(64 * KiB, 0);
  void* t2 = b.allocate(1 * KiB, 0);
  b.free(e2);
  b.free(e1);
  REQUIRE(b.allocate(64 * KiB, 0) == e1);
  REQUIRE(b.allocate(64 * KiB, 0) == e2);
  for (void* p : {e1, e2, t1, t2}) b.free(p);
}

TEST_CASE("caching allocator: a block freed on one stream is reused only on that stream", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  const uintptr_t s1 = 0x1000, s2 = 0x2000;
  void* p1 = a.allocate(64 * KiB, s1);
  a.free(p1);
  void* p2 = a.allocate(64 * KiB, s2);
  REQUIRE(p2 != p1);
  REQUIRE(dev.alloc_sizes.size() == 2);  // s1's cached segment was not used
  void* p3 = a.allocate(64 * KiB, s1);
  REQUIRE(p3 == p1);
  REQUIRE(dev.alloc_sizes.size() == 2);
  a.free(p2);
  a.free(p3);
  // Large pool too.
  void* l1 = a.allocate(4 * MiB, s2);
  a.free(l1);
  void* l2 = a.allocate(4 * MiB, s1);
  REQUIRE(l2 != l1);
  REQUIRE(dev.alloc_sizes.size() == 4);
  a.free(l2);
}

TEST_CASE("caching allocator: stats are exact, peaks follow and reset", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  CachingAllocatorStats s = a.stats();
  REQUIRE(s.allocated == 0);
  REQUIRE(s.reserved == 0);
  REQUIRE(s.segments == 0);

  void* p = a.allocate(1000, 0);          // 1024 in a 2 MiB segment
  void* q = a.allocate(5 * MiB + 1, 0);   // 5 MiB + 512 in a 20 MiB segment
  void* r = a.allocate(16 * MiB, 0);      // exactly 16 MiB in a 16 MiB segment (q's has 15 left)
  s = a.stats();
  const size_t all = 1024 + (5 * MiB + 512) + 16 * MiB;
  REQUIRE(s.allocated == all);
  REQUIRE(s.max_allocated == all);
  REQUIRE(s.reserved == 38 * MiB);
  REQUIRE(s.max_reserved == 38 * MiB);
  REQUIRE(s.segments == 3);
  REQUIRE(s.cached_blocks == 2);  // the tails of the first two segments

  a.free(r);
  s = a.stats();
  REQUIRE(s.allocated == all - 16 * MiB);
  REQUIRE(s.max_allocated == all);
  REQUIRE(s.reserved == 38 * MiB);  // cached, not returned

  a.reset_peak_stats();
  s = a.stats();
  REQUIRE(s.max_allocated == all - 16 * MiB);
  REQUIRE(s.max_reserved == 38 * MiB);

  a.empty_cache();  // the 16 MiB segment is free; the others hold live blocks
  s = a.stats();
  REQUIRE(s.reserved == 22 * MiB);
  REQUIRE(s.max_reserved == 38 * MiB);  // a peak stays until reset
  REQUIRE(s.segments == 2);
  a.reset_peak_stats();
  REQUIRE(a.stats().max_reserved == 22 * MiB);

  a.free(p);
  a.free(q);
  REQUIRE(a.stats().allocated == 0);
  REQUIRE(a.stats().max_allocated == all - 16 * MiB);
}

TEST_CASE("caching allocator: empty_cache returns only segments with nothing live", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  void* live = a.allocate(100 * KiB, 0);   // small segment, kept
  void* gone = a.allocate(3 * MiB, 0);     // large segment, freed below
  void* gone2 = a.allocate(3 * MiB, 0);    // same large segment, split twice
  a.free(gone);
  a.free(gone2);
  REQUIRE(dev.segments.size() == 2);
  a.empty_cache();
  REQUIRE(dev.frees == 1);
  REQUIRE(dev.segments.size() == 1);
  REQUIRE(dev.segments.begin()->first == ch(live));
  REQUIRE(a.stats().reserved == 2 * MiB);
  REQUIRE(a.stats().segments == 1);
  std::memset(live, 7, 100 * KiB);  // still ours
  a.free(live);
  a.empty_cache();
  REQUIRE(dev.segments.empty());
  REQUIRE(a.stats().reserved == 0);
  REQUIRE(a.stats().cached_blocks == 0);
  // Usable afterwards: a fresh segment.
  void* p = a.allocate(100 * KiB, 0);
  REQUIRE(dev.alloc_sizes.size() == 3);
  a.free(p);
}

TEST_CASE("caching allocator: out of memory flushes the cache, retries once, then says why",
          "[allocator]") {
  FakeDevice dev;
  dev.capacity = 21 * MiB;
  CachingAllocatorCore a(dev.backend());
  a.free(a.allocate(1 * KiB, 0));  // 2 MiB cached in the small pool
  REQUIRE(dev.used == 2 * MiB);

  // 20 MiB do not fit beside the cached 2 MiB: the cache goes, the retry succeeds.
  void* held = a.allocate(4 * MiB, 0);
  REQUIRE(dev.failed_allocs == 1);
  REQUIRE(dev.frees == 1);
  REQUIRE(dev.segments.size() == 1);
  REQUIRE(a.stats().reserved == 20 * MiB);

  // 50 MiB cannot be had: the only segment holds a live block, so nothing is flushed, and
  // the backend is asked exactly twice.
  try {
    a.allocate(50 * MiB, 0);
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("out of memory") != std::string::npos);
    CHECK(msg.find("tried to allocate 50.00 MiB (52428800 bytes)") != std::string::npos);
    CHECK(msg.find("4.00 MiB (4194304 bytes) allocated by Loom") != std::string::npos);
    CHECK(msg.find("20.00 MiB (20971520 bytes) reserved") != std::string::npos);
    CHECK(msg.find("1.00 MiB (1048576 bytes) free on the device") != std::string::npos);
  }
  REQUIRE(dev.failed_allocs == 3);
  REQUIRE(dev.frees == 1);
  // The allocator's books are unchanged and it keeps working.
  REQUIRE(a.stats().allocated == 4 * MiB);
  REQUIRE(a.stats().reserved == 20 * MiB);
  void* more = a.allocate(8 * MiB, 0);  // from the cached 16 MiB of the large segment
  REQUIRE(ch(more) == ch(held) + 4 * MiB);
  a.free(more);
  a.free(held);

  // A request too big to even round is out of memory too, without asking the backend.
  const int failed = dev.failed_allocs;
  REQUIRE_THROWS_AS(a.allocate(~size_t(0), 0), OutOfMemoryError);
  REQUIRE(dev.failed_allocs == failed);
}

TEST_CASE("caching allocator: freeing a foreign or already freed pointer is a ValueError", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  void* p = a.allocate(1 * KiB, 0);
  int local = 0;
  REQUIRE_THROWS_AS(a.free(&local), ValueError);
  REQUIRE_THROWS_AS(a.free(ch(p) + 512), ValueError);  // inside a block is not a block
  a.free(p);
  REQUIRE_THROWS_WITH(a.free(p), Catch::Contains("already freed"));
  REQUIRE(a.stats().allocated == 0);
}

TEST_CASE("caching allocator: threads allocating and freeing keep the books consistent", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  constexpr int kThreads = 4, kSteps = 1500;
  std::vector<int> corrupted(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::uniform_int_distribution<size_t> small(1, 256 * KiB), large(1 * MiB + 1, 12 * MiB);
      struct Held {
        char* p;
        size_t n;
        char tag;
      };
      std::vector<Held> held;
      for (int i = 0; i < kSteps; ++i) {
        if (!held.empty() && (rng() % 2 == 0 || held.size() > 16)) {
          const size_t k = rng() % held.size();
          Held h = held[k];
          // Another thread writing into our block would have changed its ends.
          if (h.p[0] != h.tag || h.p[h.n - 1] != h.tag) ++corrupted[t];
          a.free(h.p);
          held.erase(held.begin() + std::ptrdiff_t(k));
        } else {
          const size_t n = rng() % 8 == 0 ? large(rng) : small(rng);
          auto* p = static_cast<char*>(a.allocate(n, uintptr_t(t % 2)));
          const char tag = char(1 + (t * 37 + i) % 250);
          p[0] = p[n - 1] = tag;
          held.push_back({p, n, tag});
        }
      }
      for (const Held& h : held) {
        if (h.p[0] != h.tag || h.p[h.n - 1] != h.tag) ++corrupted[t];
        a.free(h.p);
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(corrupted == std::vector<int>(kThreads, 0));
  CachingAllocatorStats s = a.stats();
  REQUIRE(s.allocated == 0);
  REQUIRE(s.max_allocated > 0);
  REQUIRE(s.segments == dev.segments.size());
  REQUIRE(s.reserved == dev.used);
  REQUIRE(s.cached_blocks == s.segments);  // everything merged back into whole segments
  a.empty_cache();
  REQUIRE(dev.segments.empty());
  REQUIRE(dev.bad_frees == 0);
  REQUIRE(a.stats().reserved == 0);
}

// ---- private pools (Note [private pools]) ------------------------------------------------------

TEST_CASE("caching allocator: a private pool's blocks serve only that pool, even once freed", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  const PoolId graph = a.create_pool(), other = a.create_pool();
  REQUIRE(graph != 0);
  REQUIRE(other != graph);
  for (const size_t bytes : {100 * KiB, 3 * MiB}) {  // the small and the large free lists
    INFO(bytes);
    void* scratch = a.allocate(bytes, 0, nullptr, graph);
    const size_t segments = dev.segments.size();
    a.free(scratch);
    // Freed, it is still the graph's: the default pool and another pool get new segments.
    void* outside = a.allocate(bytes, 0);
    void* elsewhere = a.allocate(bytes, 0, nullptr, other);
    REQUIRE(dev.segments.size() == segments + 2);
    REQUIRE(ch(outside) != ch(scratch));
    REQUIRE(ch(elsewhere) != ch(scratch));
    // The graph itself gets it back (a replay's allocations land where the capture's did).
    void* again = a.allocate(bytes, 0, nullptr, graph);
    REQUIRE(ch(again) == ch(scratch));
    // And a default-pool block freed now never serves the pool.
    a.free(outside);
    void* more = a.allocate(bytes, 0, nullptr, graph);
    REQUIRE(ch(more) != ch(outside));
    for (void* p : {elsewhere, again, more}) a.free(p);
  }
  a.release_pool(graph);
  a.release_pool(other);
}

TEST_CASE("caching allocator: a private pool's books, and what empty_cache and release_pool give back",
          "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  const PoolId pool = a.create_pool();
  void* kept = a.allocate(100 * KiB, 0, nullptr, pool);  // outlives the pool, like a graph's output
  void* scratch = a.allocate(3 * MiB, 0, nullptr, pool);
  void* shared = a.allocate(5 * MiB, 0);
  PoolStats s = a.pool_stats(pool);
  REQUIRE(s.allocated == 100 * KiB + 3 * MiB);
  REQUIRE(s.reserved == 2 * MiB + 20 * MiB);
  REQUIRE(s.segments == 2);
  REQUIRE(s.owners == 1);
  // The device's totals count the pool.
  REQUIRE(a.stats().allocated == 100 * KiB + 3 * MiB + 5 * MiB);
  REQUIRE(a.stats().reserved == 2 * MiB + 40 * MiB);

  a.free(scratch);
  a.free(shared);
  REQUIRE(a.pool_stats(pool).allocated == 100 * KiB);
  // empty_cache returns the default pool's free segment, never a live pool's.
  a.empty_cache();
  REQUIRE(dev.frees == 1);
  REQUIRE(a.pool_stats(pool).reserved == 22 * MiB);
  REQUIRE(a.stats().reserved == 22 * MiB);

  // Shared by a second graph: released once, it lives on.
  a.retain_pool(pool);
  REQUIRE(a.pool_stats(pool).owners == 2);
  a.release_pool(pool);
  REQUIRE(dev.frees == 1);
  // Released by its last owner: the free segment goes back at once, the one holding `kept`
  // when `kept` is freed.
  a.release_pool(pool);
  REQUIRE(dev.frees == 2);
  s = a.pool_stats(pool);
  REQUIRE(s.owners == 0);
  REQUIRE(s.segments == 1);
  REQUIRE(s.allocated == 100 * KiB);
  std::memset(kept, 3, 100 * KiB);  // still ours
  a.free(kept);
  REQUIRE(dev.frees == 3);
  REQUIRE(dev.segments.empty());
  REQUIRE(a.stats().reserved == 0);
  REQUIRE(a.stats().allocated == 0);
  REQUIRE(a.pool_stats(pool).segments == 0);
  REQUIRE(dev.bad_frees == 0);
}

TEST_CASE("caching allocator: the out-of-memory flush spares live pools, and is skipped when releasing is not allowed",
          "[allocator]") {
  FakeDevice dev;
  dev.capacity = 24 * MiB;
  bool capturing = false;
  RawMemory backend = dev.backend();
  backend.may_release = [&capturing] { return !capturing; };
  CachingAllocatorCore a(backend);
  const PoolId pool = a.create_pool();
  a.free(a.allocate(3 * MiB, 0, nullptr, pool));  // 20 MiB cached in the pool
  a.free(a.allocate(1 * KiB, 0));                 // 2 MiB cached in the default pool
  REQUIRE(dev.used == 22 * MiB);

  // 4 MiB for the default pool: a 20 MiB segment does not fit; the flush frees only the
  // default pool's 2 MiB, which is not enough, so the request fails and the pool's
  // segment is still there.
  REQUIRE_THROWS_AS(a.allocate(4 * MiB, 0), OutOfMemoryError);
  REQUIRE(dev.frees == 1);
  REQUIRE(a.pool_stats(pool).reserved == 20 * MiB);

  // While capturing, nothing is flushed at all, and the error says why.
  a.free(a.allocate(1 * KiB, 0));  // 2 MiB cached again
  const int frees = dev.frees;
  capturing = true;
  REQUIRE_THROWS_WITH(a.allocate(4 * MiB, 0), Catch::Contains("a CUDA graph is being captured"));
  REQUIRE(dev.frees == frees);
  // The pool still serves its own requests from its cached segment.
  void* p = a.allocate(8 * MiB, 0, nullptr, pool);
  REQUIRE(dev.used == 22 * MiB);
  a.free(p);
  // Nothing goes back to the device while releasing is not allowed: not the released
  // pool's segment, not the default pool's on empty_cache().
  a.release_pool(pool);
  a.empty_cache();
  REQUIRE(dev.frees == frees);
  REQUIRE(dev.used == 22 * MiB);
  capturing = false;
  a.empty_cache();  // both go now
  REQUIRE(dev.segments.empty());
  REQUIRE(a.stats().reserved == 0);
  REQUIRE(dev.bad_frees == 0);
}

TEST_CASE("caching allocator: pools that are not alive are ValueErrors", "[allocator]") {
  FakeDevice dev;
  CachingAllocatorCore a(dev.backend());
  REQUIRE_THROWS_AS(a.allocate(1 * KiB, 0, nullptr, 7), ValueError);
  REQUIRE_THROWS_AS(a.retain_pool(7), ValueError);
  REQUIRE_THROWS_AS(a.pool_stats(0), ValueError);
  REQUIRE_THROWS_AS(a.pool_stats(7), ValueError);
  const PoolId pool = a.create_pool();
  a.release_pool(pool);
  REQUIRE_THROWS_WITH(a.release_pool(pool), Catch::Contains("no such live private pool"));
  REQUIRE_THROWS_AS(a.allocate(1 * KiB, 0, nullptr, pool), ValueError);
  REQUIRE_THROWS_AS(a.retain_pool(pool), ValueError);
  REQUIRE(a.pool_stats(pool).owners == 0);
  REQUIRE(a.stats().allocated == 0);
  REQUIRE(dev.alloc_sizes.empty());
}
