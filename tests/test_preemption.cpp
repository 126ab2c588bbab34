// train::PreemptionGuard (train/loop/preemption.h): SIGTERM and SIGUSR1 only set a flag the
// loop reads, the handlers that were there before come back at the guard's end, and one
// guard at a time. (The second signal's immediate exit, and the flagship stopped mid-epoch
// and resumed, are the CTest test `preemption`: tests/distributed/preemption_test.sh.)
#include <csignal>

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
