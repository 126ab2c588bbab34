// A clock a test moves by hand: a train::Clock for the progress bar, the metrics log and
// the event files' flush_secs.
#pragma once

#include <functional>

namespace loom::test {

struct FakeClock {
  double now = 0;
  std::function<double()> clock() {
    return [this] { return now; };
  }
};

}  // namespace loom::test
