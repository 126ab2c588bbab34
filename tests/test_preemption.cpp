// train::PreemptionGuard (train/loop/preemption.h): SIGTERM and SIGUSR1 only set a flag the
// loop reads, the handlers that were there before come back at the guard's end, and one
// guard at a time. (The second signal's immediate exit, and the flagship stopped mid-epoch
// and resumed, are the CTest test `preemption`: tests/distributed/preemption_test.sh.) The
// handlers run on an alternate stack, so a signal taken inside oneDNN's GEMM leaves the heap
// whole (Note [a signal inside oneDNN's GEMM]).
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "test_util.h"
#include "train/loop/preemption.h"

using namespace loom;

namespace {

void (*current_handler(int sig))(int) {
  struct sigaction now {};
  ::sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

}  // namespace

TEST_CASE("PreemptionGuard: SIGTERM and SIGUSR1 set the flag, and the old handlers come back", "[train][preemption]") {
  // Catch2 has its own SIGTERM handler: whatever was there comes back.
  const auto term_before = current_handler(SIGTERM), usr1_before = current_handler(SIGUSR1);
  for (int sig : {SIGTERM, SIGUSR1}) {
    {
      train::PreemptionGuard guard;
      REQUIRE_FALSE(guard.requested());
      REQUIRE(guard.signal() == 0);
      REQUIRE(current_handler(sig) != (sig == SIGTERM ? term_before : usr1_before));
      REQUIRE(std::raise(sig) == 0);  // handled: the process goes on
      REQUIRE(guard.requested());
      REQUIRE(guard.signal() == sig);
      REQUIRE(std::string(train::preemption_signal_name(guard.signal())) == (sig == SIGTERM ? "SIGTERM" : "SIGUSR1"));
    }
    REQUIRE(current_handler(SIGTERM) == term_before);
    REQUIRE(current_handler(SIGUSR1) == usr1_before);
  }
}

TEST_CASE("PreemptionGuard: request() without a signal, a new guard starting clear, one guard at a time",
          "[train][preemption]") {
  {
    train::PreemptionGuard guard;
    guard.request();  // another rank's signal, agreed in a collective
    REQUIRE(guard.requested());
    REQUIRE(guard.signal() == 0);
    REQUIRE_THROWS_AS(train::PreemptionGuard(), ValueError);
    REQUIRE(guard.requested());  // the refused one changed nothing
  }
  train::PreemptionGuard again;
  REQUIRE_FALSE(again.requested());
}

TEST_CASE("PreemptionGuard: the handlers run on an alternate stack, which goes with the guard", "[train][preemption]") {
  const auto current = [] {
    stack_t now {};
    ::sigaltstack(nullptr, &now);
    return now;
  };
  const auto enabled = [](const stack_t& s) { return !(s.ss_flags & SS_DISABLE); };
  bool before = true, during = false, after = true, on_stack = true, kept_during = false, kept_after = false;
  std::thread([&] {
    // A new thread has no alternate stack, unless a sanitizer gave it one: set that aside.
    const stack_t saved = current();
    stack_t off {};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
    before = enabled(current());
    {
      train::PreemptionGuard guard;
      during = enabled(current());
      for (int sig : {SIGTERM, SIGUSR1}) {
        struct sigaction now {};
        on_stack = on_stack && ::sigaction(sig, nullptr, &now) == 0 && (now.sa_flags & SA_ONSTACK) != 0;
      }
    }
    after = enabled(current());
    // A thread that has a stack keeps it: the guard neither replaces nor removes it.
    std::vector<char> own(size_t(64) << 10);
    stack_t mine {};
    mine.ss_sp = own.data();
    mine.ss_size = own.size();
    ::sigaltstack(&mine, nullptr);
    {
      train::PreemptionGuard guard;
      kept_during = enabled(current()) && current().ss_sp == own.data();
    }
    kept_after = enabled(current()) && current().ss_sp == own.data();
    ::sigaltstack(&off, nullptr);
    if (enabled(saved)) {
      stack_t back = saved;
      back.ss_flags = 0;
      ::sigaltstack(&back, nullptr);
    }
  }).join();
  CHECK_FALSE(before);
  CHECK(during);
  CHECK(on_stack);
  CHECK_FALSE(after);
  CHECK(kept_during);
  CHECK(kept_after);
}

TEST_CASE("PreemptionGuard: signals taken inside oneDNN's float32 GEMM leave the heap whole", "[train][preemption]") {
  // oneDNN's JIT sgemm points rsp at a heap buffer while it runs: a handler on the thread's
  // own stack wrote its frame there, and glibc aborted at a later free ("corrupted size vs.
  // prev_size"; once in ~30 runs of torchrun_restart, within these 200 signals here). In a
  // child process, where abort() ends the child at once (Catch2's handler would wait forever
  // on the heap's lock) and nothing else runs: each signal is sent to the thread doing the
  // products, at a varying moment of them.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGABRT, SIG_DFL);
    ::alarm(120);  // a heap left in pieces may hang instead
    set_num_threads(1);  // every product on this thread
    const Tensor a = ones({256, 256}), b = ones({256, 256});  // 256 multiply-adds of ones per entry
    const pthread_t self = ::pthread_self();
    for (int i = 0; i < 200; ++i) {
      train::PreemptionGuard guard;
      std::thread sender([self, i] {
        std::this_thread::sleep_for(std::chrono::microseconds(37 * (i % 16)));
        ::pthread_kill(self, SIGUSR1);
      });
      Tensor c;
      do {
        c = matmul(a, b);
      } while (!guard.requested());
      sender.join();
      if (c.min().item<float>() != 256.f || c.max().item<float>() != 256.f) ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("the child " << (WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                             : "exited with " + std::to_string(WEXITSTATUS(status))));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}
