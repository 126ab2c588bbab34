// parallel_for and the thread pool behind it (core/parallel.h, Note [a pool for a busy
// machine] in core/thread_pool.h): every index exactly once, errors rethrown, no nested
// parallelism, several callers at once, the caller's floating-point mode on the workers,
// a late worker that does not hold the others up, and workers that take no asynchronous
// signals.
#include "catch2_compat.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "core/error.h"
#include "core/parallel.h"
#include "core/thread_pool.h"

using namespace loom;

namespace {
struct ThreadsGuard {
  explicit ThreadsGuard(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(saved); }
  int saved;
};
}  // namespace

TEST_CASE("parallel_for covers every index once, in chunks of at least the grain", "[core][parallel]") {
  const ThreadsGuard threads(4);
  for (int64_t n : {1, 7, 64, 1000, 100003}) {
    for (int64_t grain : {1, 10, 4096}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex m;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      parallel_for(5, 5 + n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[size_t(i - 5)]++;
        std::lock_guard<std::mutex> lock(m);
        chunks.emplace_back(b, e);
      });
      for (auto& h : hits) REQUIRE(h.load() == 1);
      // No empty chunk, and no chunk below the grain except the last.
      int64_t short_chunks = 0;
      for (auto [b, e] : chunks) {
        REQUIRE(b < e);
        if (e - b < grain) ++short_chunks;
      }
      CHECK(short_chunks <= 1);
      CHECK(int64_t(chunks.size()) <= 4 * 4);
    }
  }
}

TEST_CASE("parallel_for rethrows the first error after every chunk has finished", "[core][parallel]") {
  const ThreadsGuard threads(2);
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH(parallel_for(0, 64, 1,
                                 [&](int64_t b, int64_t e) {
                                   if (b == 0) throw std::runtime_error("chunk 0 failed");
                                   finished += int(e - b);
                                 }),
                    "chunk 0 failed");
  CHECK(finished.load() > 0);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK(sum.load() == 999 * 1000 / 2);
}

TEST_CASE("a parallel_for inside a parallel_for runs on its thread", "[core][parallel]") {
  const ThreadsGuard threads(2);
  std::atomic<int> nested_calls{0}, mismatched{0}, outside_region{0};
  parallel_for(0, 8, 1, [&](int64_t, int64_t) {
    if (!in_parallel_region()) ++outside_region;  // no Catch assertions off the main thread
    const auto me = std::this_thread::get_id();
    parallel_for(0, 100000, 1, [&](int64_t, int64_t) {
      ++nested_calls;
      if (std::this_thread::get_id() != me) ++mismatched;
    });
  });
  CHECK(nested_calls.load() == 8);  // one serial chunk per outer chunk
  CHECK(mismatched.load() == 0);
  CHECK(outside_region.load() == 0);
  CHECK_FALSE(in_parallel_region());
}

TEST_CASE("parallel_for from several threads at once", "[core][parallel]") {
  const ThreadsGuard threads(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        const int64_t n = 1000 + 37 * t + round;
        std::vector<int> hits(static_cast<size_t>(n), 0);
        parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
        for (int h : hits) wrong += h != 1;
      }
    });
  for (auto& c : callers) c.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("set_num_threads takes effect, and the default can be read", "[core][parallel]") {
  const ThreadsGuard threads(3);
  CHECK(get_num_threads() == 3);
  std::mutex m;
  std::set<std::thread::id> ids;
  for (int round = 0; round < 50 && ids.size() < 2; ++round)
    parallel_for(0, 3, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    });
  CHECK(ids.size() >= 2);
  set_num_threads(1);
  ids.clear();
  parallel_for(0, 1000, 1, [&](int64_t, int64_t) { ids.insert(std::this_thread::get_id()); });
  CHECK(ids.size() == 1);
  CHECK_THROWS_AS(set_num_threads(0), ValueError);
}

#if defined(__x86_64__)
TEST_CASE("workers run chunks with the caller's flush-to-zero mode", "[core][parallel]") {
  const ThreadsGuard threads(2);
  const unsigned saved = _mm_getcsr();
  for (const bool flush : {true, false}) {
    _mm_setcsr(flush ? (saved | 0x8040) : (saved & ~0x8040u));
    std::atomic<int> wrong{0}, chunks{0};
    parallel_for(0, 64, 1, [&](int64_t, int64_t) {
      const bool on = (_mm_getcsr() & 0x8040) == 0x8040;
      wrong += on != flush;
      ++chunks;
    });
    CHECK(chunks.load() == 8);
    CHECK(wrong.load() == 0);
  }
  _mm_setcsr(saved);
}
#endif

TEST_CASE("pool workers take no asynchronous signals: they go to a thread not inside oneDNN's GEMM",
          "[core][parallel]") {
  // Note [a signal inside oneDNN's GEMM] in train/loop/preemption.h.
  const ThreadsGuard threads(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> on_worker{0}, open{0};
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() == caller) {  // holds its chunk until the worker has run the other (10 s at most)
      const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (on_worker.load() == 0 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
      return;
    }
    sigset_t mask;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    for (int sig : {SIGTERM, SIGUSR1, SIGINT, SIGPROF}) open += sigismember(&mask, sig) ? 0 : 1;
    ++on_worker;
  });
  REQUIRE(on_worker.load() == 1);
  CHECK(open.load() == 0);
}

TEST_CASE("the caller takes the chunks of a worker that is late, and waits only for claimed ones",
          "[core][parallel]") {
  // A worker that is slow (as one sharing its core with another process) claims one chunk
  // and takes 100 ms over it; the caller runs every other chunk meanwhile. With one fixed
  // share per thread (OpenMP's static split) the worker would run half of them: 4 × 100 ms.
  detail::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> by_worker{0}, by_caller{0};
  const auto start = std::chrono::steady_clock::now();
  const std::function<void(int64_t)> chunk = [&](int64_t) {
    if (std::this_thread::get_id() == caller) {
      ++by_caller;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      ++by_worker;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  };
  REQUIRE(pool.run(8, chunk));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(by_worker.load() + by_caller.load() == 8);
  CHECK(by_worker.load() <= 1);
  CHECK(ms < 350);
}

TEST_CASE("a pool busy with one caller's job lets another run serially", "[core][parallel]") {
  detail::ThreadPool pool(2);
  std::atomic<bool> inside{false}, release{false};
  const std::function<void(int64_t)> slow = [&](int64_t) {
    inside = true;
    while (!release) std::this_thread::yield();
  };
  std::thread first([&] { pool.run(1, slow); });
  while (!inside) std::this_thread::yield();
  const std::function<void(int64_t)> other = [](int64_t) {};
  CHECK_FALSE(pool.run(4, other));  // refused, not blocked
  release = true;
  first.join();
  CHECK(pool.run(4, other));
}

TEST_CASE("back-to-back jobs of growing size: a late worker never runs a chunk of a job that has ended",
          "[core][parallel]") {
  // A job of 2 chunks, then one of 7, over and over. A worker that read the last job's
  // exhausted ticket and then the next job's larger chunk count, before the next ticket was
  // published, once claimed a chunk past the end of a job that had returned, and called its
  // destroyed function (a crash of the flagship example, once in many runs on CI). Each
  // job here counts its own chunks; every index must run exactly once, inside its job.
  detail::ThreadPool pool(4);  // more threads than this machine's cores: workers run late
  std::atomic<int64_t> current_job{-1};
  std::atomic<int64_t> strays{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int64_t jobs = 0;
  for (; std::chrono::steady_clock::now() < deadline; ++jobs) {
    const int64_t chunks = jobs % 2 == 0 ? 2 : 7;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(chunks));  // value-initialized: 0
    current_job = jobs;
    const int64_t job = jobs;
    const std::function<void(int64_t)> chunk = [&, job, chunks](int64_t i) {
      if (current_job.load() != job || i < 0 || i >= chunks) {
        ++strays;
        return;
      }
      ++runs[size_t(i)];
    };
    if (!pool.run(chunks, chunk)) continue;
    current_job = -1;
    for (int64_t i = 0; i < chunks; ++i) REQUIRE(runs[size_t(i)].load() == 1);
  }
  CHECK(strays.load() == 0);
  CHECK(jobs > 1000);
}
