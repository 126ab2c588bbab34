// The CPU's block cache (Note [CPU block cache], core/allocator.cpp) and its books
// (core/memory.h): blocks over 1 MiB share and split segments, freed blocks merge and are
// reused whatever their size, the cache keeps at most twice the live peak, and empty_cache()
// hands every free segment back.
#include "catch2_compat.h"

#include <thread>
#include <vector>

#include "core/factories.h"
#include "core/memory.h"
#include "core/tensor.h"

using namespace loom;

namespace {
constexpr size_t MiB = size_t(1) << 20;

// A float tensor of `mib` MiB, every page written (as a kernel would).
Tensor block_of(double mib) { return full({int64_t(mib * double(MiB) / 4)}, 1.0f); }

size_t cached() { return cpu::memory_reserved() - cpu::memory_allocated(); }
}  // namespace

TEST_CASE("cpu memory: the books follow live tensors and their peak", "[core][memory]") {
  cpu::empty_cache();
  cpu::reset_peak_memory_stats();
  const size_t before = cpu::memory_allocated();
  {
    Tensor big = block_of(4);
    Tensor small = full({1000}, 2.0f);  // malloc'ed, booked too
    CHECK(cpu::memory_allocated() >= before + 4 * MiB + 4000);
    CHECK(cpu::memory_reserved() >= cpu::memory_allocated());
    CHECK(big.sum().item<double>() == double(MiB));
  }
  CHECK(cpu::memory_allocated() == before);
  CHECK(cpu::max_memory_allocated() >= before + 4 * MiB + 4000);
  cpu::reset_peak_memory_stats();
  CHECK(cpu::max_memory_allocated() == cpu::memory_allocated());
}

TEST_CASE("cpu memory: blocks of different sizes share a segment and reuse freed space", "[core][memory]") {
  cpu::empty_cache();
  const size_t base = cpu::memory_reserved();
  {
    // Under 10 MiB each: carved from one 20 MiB segment.
    Tensor a = block_of(3), b = block_of(5), c = block_of(7.5);
    CHECK(cpu::memory_reserved() - base == 20 * MiB);
  }
  // The segment is whole again (merged) and cached: other sizes now fit in it without
  // asking the system for more. The old cache matched exact sizes only.
  const size_t after_free = cpu::memory_reserved();
  CHECK(after_free - base == 20 * MiB);
  for (double mib : {6.0, 2.5, 9.0, 1.5, 4.25}) {
    Tensor t = block_of(mib);
    Tensor u = block_of(mib / 2 + 1);
    CHECK(cpu::memory_reserved() == after_free);
  }
}

TEST_CASE("cpu memory: the cache keeps no more than twice the live peak", "[core][memory]") {
  cpu::empty_cache();
  cpu::reset_peak_memory_stats();
  // Ever larger blocks, one live at a time: each needs a fresh segment, and an exact-size
  // cache would keep them all (over 1 GiB here).
  for (int i = 0; i < 40; ++i) {
    Tensor t = block_of(12 + 2 * i);
    CHECK(t.numel() > 0);
    const size_t limit = std::max<size_t>(2 * cpu::max_memory_allocated(), 32 * MiB);
    CHECK(cached() <= limit);
  }
  CHECK(cpu::max_memory_reserved() < 300 * MiB);
}

TEST_CASE("cpu memory: a repeated step whose blocks fragment keeps its segments", "[core][memory]") {
  cpu::empty_cache();
  cpu::reset_peak_memory_stats();
  // A step: a and b live, a freed, c too big for a's hole takes a segment of its own; the
  // live peak is b + c (80 MiB) but the step holds a + b + c (110 MiB). Freeing it all must
  // not hand segments back that the next step asks the system for again.
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step);
    Tensor a = block_of(30), b = block_of(30);
    a = Tensor();
    Tensor c = block_of(50);
    const size_t held = cpu::memory_reserved();
    CHECK(held >= 110 * MiB);
    b = Tensor(), c = Tensor();
    CHECK(cpu::memory_reserved() == held);
  }
}

TEST_CASE("cpu memory: empty_cache returns every free segment", "[core][memory]") {
  cpu::empty_cache();
  const size_t base = cpu::memory_reserved();
  std::vector<Tensor> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(block_of(11 + i));
  Tensor keep = block_of(2);
  const size_t held = cpu::memory_reserved();
  CHECK(held - base >= 6 * 11 * MiB);
  blocks.clear();
  // Cached (no more than twice the live peak of blocks of 11 to 16 MiB, and 2).
  CHECK(cpu::memory_reserved() > base + 20 * MiB);
  CHECK(cached() <= 2 * cpu::max_memory_allocated());
  CHECK(cpu::memory_reserved() <= held);
  empty_cache();
  // Only keep's 20 MiB segment is left.
  CHECK(cpu::memory_reserved() - base == 20 * MiB);
  CHECK(keep.sum().item<double>() == double(MiB / 2));
}

TEST_CASE("cpu memory: allocation from several threads keeps the books straight", "[core][memory]") {
  const size_t before = cpu::memory_allocated();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) {
        Tensor a = block_of(1.5 + (i + t) % 7), b = full({100 + i}, 1.0f);
        if (a.numel() == 0 || b.numel() == 0) std::abort();
      }
    });
  for (auto& th : threads) th.join();
  CHECK(cpu::memory_allocated() == before);
}
