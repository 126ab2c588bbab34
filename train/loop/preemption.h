// Preemption: a job asked to stop (SIGTERM from torchrun, Kubernetes or `scancel`; SIGUSR1
// from Slurm's `--signal=USR1@120`, or SIGTERM with `--signal=B:TERM@120` forwarded by the
// batch script) finishes its current optimizer step, writes a checkpoint and exits with
// kPreemptedExitCode; a second signal ends the process at once.
//
//   train::PreemptionGuard preemption;            // installs the handlers; restores on scope exit
//   for (auto& batch : loader) {
//     step(batch);
//     if (preemption.requested()) { save_checkpoint(...); return train::kPreemptedExitCode; }
//   }
//
// Note [preemption signals]
// The handler only sets a lock-free atomic flag (all a signal handler may safely do); the
// loop reads it after each optimizer step, so the step in flight ends whole and the
// checkpoint holds a state a run really passed through. A second SIGTERM or SIGUSR1 while
// the flag is set restores the default action and raises the signal again: the process dies
// by it (a shell's 128 + 15 = 143 for SIGTERM), without writing anything; the newest complete
// checkpoint stays the one on disk, since checkpoints are written to a temporary file and
// renamed. The handlers are installed with SA_RESTART, so a system call the signal
// interrupts (a socket's read in a collective, a file's write) resumes instead of failing.
//
// Note [a signal inside oneDNN's GEMM]
// The handlers run on an alternate signal stack (SA_ONSTACK; the guard gives the thread that
// makes it one, unless it has one): oneDNN's JIT sgemm kernels (Debian's libdnnl 2.6.3, and
// upstream up to its PR 4855) point rsp at a heap workspace while they run, so a signal taken
// there writes its frame onto the heap ("corrupted size vs. prev_size" at a later free:
// oneDNN issue 4845). Loom's pool workers, which run that GEMM too, take no
// asynchronous signals (core/thread_pool.cpp); Linux hands a process-directed signal to the
// main thread first anyway, which makes the guard in the examples.
#pragma once

#include <csignal>
#include <memory>

namespace loom::train {

// 128 + SIGTERM: what a shell, Docker and Kubernetes report for a process SIGTERM stopped,
// and one Kubeflow's restartPolicy ExitCode retries (130, 137, 138, 143; 1, 2 and the rest fail);
// torchrun restarts the workers while --max-restarts lasts (any non-zero exit), and an
// sbatch script can requeue on it (docs/distributed.md, "Preemption").
constexpr int kPreemptedExitCode = 143;

class PreemptionGuard {
 public:
  // SIGTERM and SIGUSR1 set the flag from now on; this thread gets an alternate signal stack
  // for them if it has none (Note [a signal inside oneDNN's GEMM]).
  PreemptionGuard();
  ~PreemptionGuard();  // the handlers (and the signal stack) that were there before; on the same thread
  PreemptionGuard(const PreemptionGuard&) = delete;
  PreemptionGuard& operator=(const PreemptionGuard&) = delete;

  // A stop was asked for (by a signal, or request() below).
  bool requested() const;
  // The signal that asked (SIGTERM, SIGUSR1), or 0 (none, or request()).
  int signal() const;
  // Asks for a stop as a signal would (another rank's signal, agreed in a collective).
  void request();

 private:
  struct sigaction old_term_ {}, old_usr1_ {};
  std::unique_ptr<char[]> stack_;  // the alternate signal stack this guard set up, if any
};

// "SIGTERM", "SIGUSR1", or "signal N".
const char* preemption_signal_name(int signal);

}  // namespace loom::train
