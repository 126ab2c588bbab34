// The float32 FMA peak of this CPU, measured where the benchmark runs: the ceiling of the
// GEMM lines (bench_core.cpp). The machines change between sessions (AVX2-only EPYCs, Zen 4
// with AVX-512, Xeons with AMX; shared/workloads.md), so a constant ceiling is wrong on most.
//
// Each thread runs kChains independent chains of fused multiply-adds in the widest vectors
// the CPU runs (AVX-512, else AVX2 + FMA): an FMA's result is ready after 4-5 cycles and up
// to 2 issue per cycle, so about 10 chains in flight keep both units busy; 12 accumulators
// and 2 constants still fit AVX2's 16 registers. All threads run at once (as a GEMM on all of
// them does), and the best of a few runs counts, so a moment of load elsewhere does not.
//
// Header-only and free of Loom's library (bench_util.h's rule; core/cpu_features.h is
// header-only too), with per-function target attributes instead of per-file flags: every
// bench/*.cpp is its own program, built for baseline x86-64, and these functions are only
// called after cpu_features says the CPU (and the OS) runs the ISA.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_FMA_PEAK_X86 1
#endif

namespace bench {

struct FmaPeak {
  const char* isa;  // "avx512f", "avx2+fma", or "none" (no FMA vectors: not measured)
  int threads;
  double gflops;    // float32, all threads together; 0 when not measured
};

namespace fma_detail {

constexpr int kChains = 12;

#if BENCH_FMA_PEAK_X86
// iters × kChains FMAs of 16 lanes; returns a value that depends on every chain (so none is
// optimised away). acc = acc * a + b converges to b / (1 - a): no overflow, no denormals.
__attribute__((target("avx512f"))) inline float chains_avx512(long iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(float(k));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm512_add_ps(sum, acc[k]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) inline float chains_avx2(long iters) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(float(k));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm256_add_ps(sum, acc[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}
#endif

// Seconds for `threads` threads, started together, to each run chains(iters).
template <typename Chains>
double run_together(Chains chains, int threads, long iters) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<float> sink(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      sink[size_t(t)] = chains(iters);
    });
  }
  while (ready.load() < threads) {
  }
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float keep = sink[0];  // the results are used
  (void)keep;
  return s;
}

}  // namespace fma_detail

// The peak of `threads` threads at once (the benchmark's thread count), best of `runs` runs of
// about 50 ms each (quick: 2 runs of about 10 ms).
inline FmaPeak measure_fma_peak(int threads, bool quick = false) {
  threads = std::max(threads, 1);
#if BENCH_FMA_PEAK_X86
  const loom::CpuFeatures& f = loom::cpu_features();
  const bool avx512 = f.avx512f;
  const bool avx2 = f.avx2 && f.fma;
  if (!avx512 && !avx2) return {"none", threads, 0};
  const int lanes = avx512 ? 16 : 8;
  auto chains = [avx512](long iters) { return avx512 ? fma_detail::chains_avx512(iters) : fma_detail::chains_avx2(iters); };
  const long iters = quick ? 2'000'000 : 10'000'000;  // × 12 FMAs: ~10-50 ms at 1-3 FMA vectors a cycle
  const int runs = quick ? 2 : 5;
  fma_detail::run_together(chains, threads, iters / 10);  // warm-up: clocks up, threads made once
  double best = 1e30;
  for (int r = 0; r < runs; ++r) best = std::min(best, fma_detail::run_together(chains, threads, iters));
  const double flops = 2.0 * lanes * fma_detail::kChains * double(iters) * threads;  // an FMA is 2 flops a lane
  return {avx512 ? "avx512f" : "avx2+fma", threads, flops / best / 1e9};
#else
  return {"none", threads, 0};
#endif
}

}  // namespace bench
