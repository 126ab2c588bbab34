// What the benchmark programs share: their command line, the timer and the JSON line.
// Header-only and free of Loom, so the LibTorch comparison programs (bench/torch_*.cpp)
// use it too.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace bench {

struct Options {
  int threads = 0;  // 0: the framework's default
  bool quick = false;
};

// [--threads N] [--quick]; anything else prints the usage and exits.
inline Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--quick")) {
      o.quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--quick]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

// The 1-minute load average (-1 where unknown): benchmarks print it, so a busy machine shows.
inline double load1() {
  double load = -1;
  return getloadavg(&load, 1) == 1 ? load : -1;
}

// Median wall-clock seconds of fn() over `reps` runs, after `warmup` untimed runs.
template <typename F>
double median_seconds(F&& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Result {
  const char* bench;
  const char* framework;
  int64_t size;
  const char* dtype;
  int threads;
  double value;
  const char* unit;
  double ceiling = 0;      // > 0 adds "ceiling" and "fraction_of_ceiling"; NaN adds both as null (unknown)
  const char* extra = "";  // more fields, each starting with a comma
};

// One JSON object on one line.
inline void print(const Result& r) {
  std::printf("{\"bench\":\"%s\",\"framework\":\"%s\",\"size\":%lld,\"dtype\":\"%s\",\"threads\":%d,"
              "\"value\":%.4g,\"unit\":\"%s\"",
              r.bench, r.framework, static_cast<long long>(r.size), r.dtype, r.threads, r.value, r.unit);
  if (r.ceiling > 0)
    std::printf(",\"ceiling\":%.4g,\"fraction_of_ceiling\":%.3f", r.ceiling, r.value / r.ceiling);
  else if (r.ceiling != r.ceiling)
    std::printf(",\"ceiling\":null,\"fraction_of_ceiling\":null");
  std::printf("%s}\n", r.extra);
  std::fflush(stdout);
}

// The "gemm" lines: float32 n x n products at n = 256, 1024, 2048, in GFLOP/s (2 n³ flops),
// beside `ceiling`, the float32 FMA peak measured in the same run (fma_peak.h).
// make_product(n) returns a callable that computes one product of fresh random matrices.
template <typename MakeProduct>
void gemm_lines(const char* framework, int threads, bool quick, double ceiling, MakeProduct make_product) {
  for (int64_t n : {256, 1024, 2048}) {
    auto product = make_product(n);
    const int reps = quick ? 3 : (n <= 256 ? 50 : n <= 1024 ? 15 : 7);
    const double s = median_seconds(product, 2, reps);
    print({"gemm", framework, n, "float32", threads, 2.0 * double(n) * double(n) * double(n) / s / 1e9,
           "GFLOP/s", ceiling});
  }
}

// The "tiny_add" and "tiny_add_autograd" lines: ns per a + b on 1- and 16-element float32
// tensors. make_add(n, requires_grad) returns a callable that computes one a + b.
template <typename MakeAdd>
void tiny_add_lines(const char* framework, int threads, bool quick, MakeAdd make_add) {
  const int iters = quick ? 2000 : 20000;  // ops per timed run
  for (bool autograd : {false, true}) {
    for (int64_t n : {1, 16}) {
      auto add = make_add(n, autograd);
      const double s = median_seconds([&] {
        for (int i = 0; i < iters; ++i) add();
      }, 1, quick ? 3 : 9);
      print({autograd ? "tiny_add_autograd" : "tiny_add", framework, n, "float32", threads, s / iters * 1e9,
             "ns"});
    }
  }
}

}  // namespace bench
