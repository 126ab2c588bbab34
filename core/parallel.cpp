#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"

namespace loom {
namespace {
std::atomic<int> num_threads{0};  // 0: not set yet
thread_local bool serial_thread = false;  // see SerialThreadGuard

int default_threads() {
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}
}  // namespace

void set_num_threads(int n) {
  LOOM_CHECK(n >= 1, ValueError, "set_num_threads: expected a positive count, got ", n);
  num_threads = n;
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

int get_num_threads() {
  int n = num_threads.load();
  return n > 0 ? n : default_threads();
}

SerialThreadGuard::SerialThreadGuard() : previous_(serial_thread) { serial_thread = true; }
SerialThreadGuard::~SerialThreadGuard() { serial_thread = previous_; }

bool in_parallel_region() {
  if (serial_thread) return true;
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (begin >= end) return;
  const int64_t range = end - begin;
  int threads = get_num_threads();
#ifndef _OPENMP
  threads = 1;
#endif
  if (in_parallel_region()) threads = 1;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(threads, (range + grain - 1) / grain);
  if (chunks <= 1) {
    fn(begin, end);
    return;
  }
#ifdef _OPENMP
  // Exceptions must not escape an OpenMP region: keep the first and rethrow after.
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(int(chunks))
  {
    const int64_t tid = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t per = (range + nt - 1) / nt;
    const int64_t b = begin + tid * per;
    const int64_t e = std::min(end, b + per);
    if (b < e) {
      try {
        fn(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
#endif
}

}  // namespace loom
