// The worker threads behind parallel_for (core/parallel.h).
//
// Note [a pool for a busy machine]
// OpenMP's teams, which Loom used first, fail on a machine whose cores are shared with other
// processes: every region ends at a barrier that waits for each thread of the team, and the
// threads spin (for milliseconds) while they wait. With one other busy process on 2 cores a
// worker would get its core only every few milliseconds, and each of the thousands of
// regions of a training step waited for it: the flagship's epoch went 6× slower. This pool
// is built for that case, without losing speed on a quiet machine:
// - A job is a count of chunks. Threads claim chunks one at a time from a shared counter;
//   the caller claims them too, so a worker that has not woken up yet when the caller runs
//   out of chunks simply finds none left: nobody waits for a thread that is not running.
//   The caller waits only for chunks already claimed.
// - Idle workers spin for a short while (kSpin, tens of microseconds: the gap between
//   two ops of a training step) and then sleep on a futex (std::atomic::wait). The caller
//   waits the same way for claimed chunks, so a preempted worker can take its core.
// - A chunk runs with the caller's floating-point control word (MXCSR on x86: flush-to-zero,
//   denormals-are-zero, rounding), so a parallel op computes as the caller would.
// Chunk boundaries depend only on the range, the grain and the thread count, never on who
// runs what: results are as deterministic as with a fixed split.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::detail {

// True on a pool's worker threads, and on a thread while it runs a job of a pool: there a
// parallel_for runs serially (no nested parallelism).
bool in_pool_job();

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();  // stops and joins the workers
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }

  // Calls chunk(i) once for every i in [0, chunks), on the calling thread and the workers,
  // and returns when all are done; the first exception thrown is rethrown here. Returns
  // false, running nothing, when another thread is using the pool (the caller then runs
  // serially).
  bool run(int64_t chunks, const std::function<void(int64_t)>& chunk);

 private:
  void work();
  void run_chunks(uint32_t generation);

  std::vector<std::thread> workers_;
  std::mutex busy_;  // one job at a time

  // The job. `ticket` packs the job's generation (high 32 bits) and the count of chunks not
  // yet claimed (low 32 bits); a claim decrements it. Whether a chunk is left is read from
  // the ticket alone, so a worker that wakes late cannot claim a chunk of a job that has
  // ended, nor one of a newer job under an old job's function: its compare-and-swap fails
  // on the generation. (Testing the claim against `chunks_`, which a newer job may already
  // have raised, let a late worker run past the end of an ended job.)
  const std::function<void(int64_t)>* chunk_ = nullptr;
  std::atomic<int64_t> chunks_{0};
  unsigned fp_control_ = 0;
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> generation_{0};  // what idle workers wait on
  std::atomic<int32_t> done_{0};         // chunks of this job finished
  std::atomic<bool> stop_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace loom::detail
