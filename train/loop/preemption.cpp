#include "train/loop/preemption.h"

#include <atomic>

#include "core/error.h"

namespace loom::train {
namespace {

// The signal that asked for a stop; -1: a request() with no signal. Lock-free, so the
// handler may store into it (Note [preemption signals]).
std::atomic<int> g_signal{0};
std::atomic<bool> g_requested{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);
std::atomic<int> g_guards{0};

extern "C" void on_preemption_signal(int sig) {
  if (g_requested.exchange(true)) {  // the second one: the default action, now
    std::signal(sig, SIG_DFL);
    std::raise(sig);  // delivered when this handler returns (the signal is blocked in it)
    return;
  }
  g_signal.store(sig);
}

void install(int sig, struct sigaction* old) {
  struct sigaction sa {};
  sa.sa_handler = on_preemption_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  LOOM_CHECK(::sigaction(sig, &sa, old) == 0, InternalError, "PreemptionGuard: sigaction(",
             preemption_signal_name(sig), ") failed");
}

}  // namespace

PreemptionGuard::PreemptionGuard() {
  if (g_guards.fetch_add(1) != 0) {
    g_guards.fetch_sub(1);
    throw ValueError("PreemptionGuard: one at a time (a signal's handler is process-wide), and one exists");
  }
  g_requested.store(false);
  g_signal.store(0);
  try {
    install(SIGTERM, &old_term_);
    install(SIGUSR1, &old_usr1_);
  } catch (...) {
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_guards.fetch_sub(1);
    throw;
  }
}

PreemptionGuard::~PreemptionGuard() {
  ::sigaction(SIGUSR1, &old_usr1_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  g_guards.fetch_sub(1);
}

bool PreemptionGuard::requested() const { return g_requested.load(); }

int PreemptionGuard::signal() const {
  const int s = g_signal.load();
  return s > 0 ? s : 0;
}

void PreemptionGuard::request() { g_requested.store(true); }

const char* preemption_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case 0: return "a request";
    default: return "a signal";
  }
}

}  // namespace loom::train
