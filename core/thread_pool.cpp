// The worker threads behind parallel_for (Note [a pool for a busy machine]).
#include "core/thread_pool.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOOM_POOL_X86 1
#endif

#include "core/error.h"
#include "core/profiler.h"

namespace loom::detail {
namespace {

// How long an idle thread polls before it sleeps. A training step's ops follow each other
// within microseconds, so a worker that polls that long is there for the next op; much
// longer, and on a busy machine it takes a core from a thread with work.
constexpr auto kSpin = std::chrono::microseconds(50);

void relax() {
#ifdef LOOM_POOL_X86
  _mm_pause();
#endif
}

unsigned fp_control() {
#ifdef LOOM_POOL_X86
  return _mm_getcsr();
#else
  return 0;
#endif
}

void set_fp_control(unsigned word) {
#ifdef LOOM_POOL_X86
  if (_mm_getcsr() != word) _mm_setcsr(word);
#else
  (void)word;
#endif
}

// A worker runs oneDNN's JIT GEMM, inside which a signal's frame would land on the heap
// (Note [a signal inside oneDNN's GEMM] in train/loop/preemption.h): it takes no
// asynchronous signal, so the kernel hands a process-directed one (SIGTERM, SIGINT, ...) to
// another thread. The signals a fault raises, and abort's, stay open.
void block_asynchronous_signals() {
  sigset_t set;
  sigfillset(&set);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Polls until done() for up to kSpin, then sleeps on `value` until it changes from what it
// was: the caller's loop re-checks done() after each wake-up.
template <typename Atomic, typename Done>
void spin_then_wait(Atomic& value, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    const auto seen = value.load(std::memory_order_acquire);
    if (done(seen)) return;
    if ((i & 15) != 15 || std::chrono::steady_clock::now() < deadline) {
      relax();
      continue;
    }
    value.wait(seen, std::memory_order_acquire);
  }
}

constexpr uint64_t kChunkMask = 0xffffffffu;

thread_local bool in_job = false;

// Marks the calling thread as running a job for the guard's lifetime.
class InJob {
 public:
  InJob() : previous_(in_job) { in_job = true; }
  ~InJob() { in_job = previous_; }
  InJob(const InJob&) = delete;
  InJob& operator=(const InJob&) = delete;

 private:
  bool previous_;
};

}  // namespace

bool in_pool_job() { return in_job; }

ThreadPool::ThreadPool(int threads) {
  LOOM_ASSERT(threads >= 1);
  workers_.reserve(size_t(threads - 1));
  for (int w = 0; w + 1 < threads; ++w)
    workers_.emplace_back([this, w] {
      block_asynchronous_signals();
      profiler::set_thread_name("Loom pool worker " + std::to_string(w + 1));  // the caller is the 0th
      work();
    });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

bool ThreadPool::run(int64_t chunks, const std::function<void(int64_t)>& chunk) {
  LOOM_ASSERT(chunks >= 1 && uint64_t(chunks) <= kChunkMask);
  std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
  if (!lock.owns_lock()) return false;

  chunk_ = &chunk;
  chunks_.store(chunks, std::memory_order_relaxed);
  fp_control_ = fp_control();
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  ticket_.store(uint64_t(generation) << 32 | uint64_t(chunks), std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();

  {
    const InJob in_this_job;
    run_chunks(generation);
  }
  // Only chunks some thread has claimed are left: wait for those.
  spin_then_wait(done_, [&](int32_t done) { return done == chunks; });
  if (error_) std::rethrow_exception(error_);
  return true;
}

void ThreadPool::run_chunks(uint32_t generation) {
  for (;;) {
    uint64_t ticket = ticket_.load(std::memory_order_acquire);
    do {
      // A newer job, or no chunk left to claim: done. The test reads the ticket alone: a
      // late worker of an ended job sees its ticket at 0 left (or a newer generation), and
      // never another job's fields.
      if (ticket >> 32 != generation || (ticket & kChunkMask) == 0) return;
    } while (!ticket_.compare_exchange_weak(ticket, ticket - 1, std::memory_order_acq_rel, std::memory_order_acquire));
    // The chunk is ours, so the job cannot end (and its fields cannot change) before it is
    // done; the acquire above made them visible.
    const int64_t chunks = chunks_.load(std::memory_order_relaxed);
    const int64_t index = chunks - int64_t(ticket & kChunkMask);  // claimed in order 0, 1, ...
    set_fp_control(fp_control_);
    try {
      (*chunk_)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_one();
  }
}

void ThreadPool::work() {
  in_job = true;  // for good: a worker's own parallel_for runs serially
  uint32_t handled = 0;
  for (;;) {
    spin_then_wait(generation_, [&](uint32_t g) { return g != handled || stop_.load(std::memory_order_acquire); });
    if (stop_.load(std::memory_order_acquire)) return;
    handled = generation_.load(std::memory_order_acquire);
    run_chunks(handled);
  }
}

}  // namespace loom::detail
