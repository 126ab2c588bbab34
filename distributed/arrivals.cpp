#include "distributed/arrivals.h"

#include <chrono>
#include <vector>

#include "distributed/error.h"

namespace loom::distributed {

void Arrivals::enter(uint32_t seq) {
  std::string count = std::to_string(uint64_t(seq) + 1);
  try {
    store_->set(key(rank_), std::vector<char>(count.begin(), count.end()));
  } catch (const DistributedError&) {
    // Rank 0 may have finished and closed the store (a broadcast's root need not wait for
    // the others); the collective itself decides whether this rank fails.
  }
}

std::string Arrivals::missing(uint32_t seq) {
  std::string ranks, lasts;
  int absent = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    uint64_t entered = 0;
    try {
      store_->wait({key(r)}, std::chrono::milliseconds(100));
      std::vector<char> text = store_->get(key(r));
      entered = std::stoull(std::string(text.begin(), text.end()));
    } catch (const DistributedError& e) {
      if (std::string(e.what()).find("timed out") == std::string::npos) {
        return "the store does not answer, so which ranks did not arrive is unknown (rank 0, which serves it, "
               "may be the one that stopped): " + std::string(e.what());
      }
    }
    if (entered > seq) continue;  // it entered #seq
    if (absent++ > 0) {
      ranks += ", ";
      lasts += ", ";
    }
    ranks += std::to_string(r);
    lasts += entered ? '#' + std::to_string(entered - 1) : std::string("none");
  }
  if (absent == 0) return "every rank entered it";
  return std::string(absent > 1 ? "ranks " : "rank ") + ranks + " did not arrive (last collective entered: " +
         lasts + ")";
}

}  // namespace loom::distributed
