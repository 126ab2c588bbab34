#include "core/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"

namespace loom {
namespace {
std::atomic<int> num_threads{0};  // 0: not set yet
thread_local bool serial_thread = false;  // see SerialThreadGuard

// Chunks per thread when the range allows: a thread that starts late, or is slowed by
// another process on its core, then holds up only a small share (Note [a pool for a busy
// machine]).
constexpr int64_t kChunksPerThread = 4;

// OMP_NUM_THREADS when set (as PyTorch honours it), else the cores this process may run on.
int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 4096) return int(n);
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

// The pool for the current thread count, made on first use. A caller keeps the pool it got
// alive while it runs a job, so set_num_threads may replace it at any time.
std::shared_ptr<detail::ThreadPool> pool_for(int threads) {
  static std::mutex mutex;
  static auto* pool = new std::shared_ptr<detail::ThreadPool>;  // never destroyed: workers may outlive main
  std::lock_guard<std::mutex> lock(mutex);
  if (!*pool || (*pool)->threads() != threads) *pool = std::make_shared<detail::ThreadPool>(threads);
  return *pool;
}
}  // namespace

void set_num_threads(int n) {
  LOOM_CHECK(n >= 1, ValueError, "set_num_threads: expected a positive count, got ", n);
  num_threads = n;
}

int get_num_threads() {
  const int n = num_threads.load();
  if (n > 0) return n;
  static const int fallback = default_threads();
  return fallback;
}

SerialThreadGuard::SerialThreadGuard() : previous_(serial_thread) { serial_thread = true; }
SerialThreadGuard::~SerialThreadGuard() { serial_thread = previous_; }

bool in_parallel_region() { return serial_thread || detail::in_pool_job(); }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (begin >= end) return;
  const int64_t range = end - begin;
  const int threads = in_parallel_region() ? 1 : get_num_threads();
  grain = std::max<int64_t>(grain, 1);
  const int64_t most = std::min<int64_t>(int64_t(threads) * kChunksPerThread, range / grain + (range % grain != 0));
  if (threads <= 1 || most <= 1) {
    fn(begin, end);
    return;
  }
  const int64_t per = range / most + (range % most != 0);
  const int64_t chunks = range / per + (range % per != 0);  // none of them empty
  // One pointer captured, so the std::function below needs no heap allocation.
  const struct {
    int64_t begin, end, per;
    const std::function<void(int64_t, int64_t)>& fn;
  } job{begin, end, per, fn};
  const std::function<void(int64_t)> chunk = [p = &job](int64_t i) {
    p->fn(p->begin + i * p->per, std::min(p->end, p->begin + (i + 1) * p->per));
  };
  // Busy with another thread's job: this one runs serially.
  if (!pool_for(threads)->run(chunks, chunk)) {
    for (int64_t i = 0; i < chunks; ++i) chunk(i);
  }
}

}  // namespace loom
