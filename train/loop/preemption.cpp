#include "train/loop/preemption.h"

#include <unistd.h>

#include <algorithm>
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
  sa.sa_flags = SA_RESTART | SA_ONSTACK;  // Note [a signal inside oneDNN's GEMM]
  LOOM_CHECK(::sigaction(sig, &sa, old) == 0, InternalError, "PreemptionGuard: sigaction(",
             preemption_signal_name(sig), ") failed");
}

// Room for two nested signal frames with the whole register state (AVX-512's is 2.7 KiB,
// AMX's 11 KiB), and at least what the system asks for.
size_t signal_stack_bytes() {
  size_t bytes = size_t(64) << 10;
#ifdef _SC_SIGSTKSZ
  if (const long asked = ::sysconf(_SC_SIGSTKSZ); asked > 0) bytes = std::max(bytes, size_t(asked));
#endif
  return bytes;
}

// Gives the calling thread an alternate signal stack, unless it has one (a sanitizer's, say):
// the memory it set up, or null.
std::unique_ptr<char[]> give_signal_stack() {
  stack_t now {};
  LOOM_CHECK(::sigaltstack(nullptr, &now) == 0, InternalError, "PreemptionGuard: sigaltstack failed");
  if (!(now.ss_flags & SS_DISABLE)) return nullptr;
  stack_t ss {};
  ss.ss_size = signal_stack_bytes();
  auto memory = std::make_unique<char[]>(ss.ss_size);
  ss.ss_sp = memory.get();
  LOOM_CHECK(::sigaltstack(&ss, nullptr) == 0, InternalError, "PreemptionGuard: sigaltstack failed");
  return memory;
}

void take_signal_stack(std::unique_ptr<char[]>& memory) {
  if (!memory) return;
  stack_t off {};
  off.ss_flags = SS_DISABLE;
  ::sigaltstack(&off, nullptr);
  memory.reset();
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
    stack_ = give_signal_stack();  // before the handlers that run on it
  } catch (...) {
    g_guards.fetch_sub(1);
    throw;
  }
  try {
    install(SIGTERM, &old_term_);
    install(SIGUSR1, &old_usr1_);
  } catch (...) {
    ::sigaction(SIGTERM, &old_term_, nullptr);
    take_signal_stack(stack_);
    g_guards.fetch_sub(1);
    throw;
  }
}

PreemptionGuard::~PreemptionGuard() {
  ::sigaction(SIGUSR1, &old_usr1_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  take_signal_stack(stack_);
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
