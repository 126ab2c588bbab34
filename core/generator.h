// Random numbers: Philox4x32-10, a counter-based generator.
//
// Note [random numbers]
// Philox maps (key = seed, counter) to four 32-bit words with no state beyond the
// counter, so any element's numbers can be computed independently: the CPU fills
// element i from counter (offset + i / 4) and the CUDA backend can do the same per
// thread and produce identical numbers for the same seed. A generator is (seed,
// offset); each random op reserves the counters it uses by advancing the offset.
#pragma once

#include <array>
#include <cstdint>
#include <atomic>
#include <mutex>

#include "core/half.h"

namespace loom {

struct Philox {
  LOOM_HOST_DEVICE static std::array<uint32_t, 4> block(uint64_t key, uint64_t counter_lo,
                                                         uint64_t counter_hi = 0) {
    uint32_t c0 = uint32_t(counter_lo), c1 = uint32_t(counter_lo >> 32);
    uint32_t c2 = uint32_t(counter_hi), c3 = uint32_t(counter_hi >> 32);
    uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c0;
      uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
      uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
      uint32_t n1 = uint32_t(p1);
      uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
      uint32_t n3 = uint32_t(p0);
      c0 = n0; c1 = n1; c2 = n2; c3 = n3;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return {c0, c1, c2, c3};
  }
  // A uniform float in [0, 1) from 24 random bits; a double from 53 bits.
  LOOM_HOST_DEVICE static float to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }
  LOOM_HOST_DEVICE static double to_unit_double(uint32_t hi, uint32_t lo) {
    uint64_t v = (uint64_t(hi) << 21) ^ (uint64_t(lo) >> 11);
    return double(v & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
  }
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    offset_ = 0;
    ++reseeds_;
  }
  uint64_t seed() const { return seed_; }
  // Reserves `n` Philox blocks; returns the first counter of the reserved range.
  uint64_t reserve(uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t start = offset_;
    offset_ += n;
    return start;
  }
  uint64_t offset() const { return offset_; }
  // Gives back the counters reserved since `from` if the offset is still `at` (nobody
  // reserved more meanwhile); what a CUDA graph's capture does at its end, since the
  // capture only records its draws (Note [graph-safe random numbers]). Not a reseed.
  bool rewind(uint64_t at, uint64_t from) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (offset_ != at || from > at) return false;
    offset_ = from;
    return true;
  }
  void set_state(uint64_t seed, uint64_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    offset_ = offset;
    ++reseeds_;
  }
  // Counts manual_seed/set_state calls: lets a generator kept elsewhere (cuDNN's dropout
  // states on a GPU) notice that this one was seeded again, even to the same seed.
  uint64_t reseeds() const { return reseeds_.load(); }

 private:
  std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  std::atomic<uint64_t> reseeds_{0};
};

// The global generator used by rand/randn/dropout/shuffling unless told otherwise.
Generator& default_generator();
inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace loom
