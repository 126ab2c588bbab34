// Intra-op parallelism on the CPU: parallel_for splits [begin, end) over the worker
// threads (OpenMP) when the range is large enough to pay for it.
#pragma once

#include <cstdint>
#include <functional>

namespace loom {

// Threads used by CPU kernels and Eigen's GEMM. Defaults to the hardware's cores.
void set_num_threads(int n);
int get_num_threads();

// True on a worker thread of a parallel_for (or any OpenMP parallel region): nested
// parallel loops and GEMMs then run on the calling thread.
bool in_parallel_region();

// Makes the calling thread run its kernels and GEMMs serially while the guard lives, as
// if inside a parallel region: for threads that are themselves the parallelism (the
// DataLoader's workers), so they do not each start a team of OpenMP threads.
class SerialThreadGuard {
 public:
  SerialThreadGuard();
  ~SerialThreadGuard();
  SerialThreadGuard(const SerialThreadGuard&) = delete;
  SerialThreadGuard& operator=(const SerialThreadGuard&) = delete;

 private:
  bool previous_;
};

// Below this many elements a loop runs on the calling thread.
constexpr int64_t kParallelGrain = 32768;

// Calls fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end).
// Runs serially when (end - begin) < grain, when only one thread is set, or when called
// from inside another parallel region.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace loom
