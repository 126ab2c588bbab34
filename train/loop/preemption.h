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
#pragma once

#include <csignal>

namespace loom::train {

// 128 + SIGTERM: what a shell, Docker and Kubernetes report for a process SIGTERM stopped,
// and one Kubeflow's restartPolicy ExitCode retries (130, 137, 138, 143; 1, 2 and the rest fail);
// torchrun restarts the workers while --max-restarts lasts (any non-zero exit), and an
// sbatch script can requeue on it (docs/distributed.md, "Preemption").
constexpr int kPreemptedExitCode = 143;

class PreemptionGuard {
 public:
  PreemptionGuard();   // SIGTERM and SIGUSR1 set the flag from now on
  ~PreemptionGuard();  // the handlers that were there before
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
};

// "SIGTERM", "SIGUSR1", or "signal N".
const char* preemption_signal_name(int signal);

}  // namespace loom::train
