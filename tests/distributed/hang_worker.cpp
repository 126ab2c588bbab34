// hang_worker: the distributed_hang test's program (hang_test.sh). Two ranks, collectives
// with a 2 s timeout: one all_reduce together, then rank 1 stops itself with SIGSTOP and
// rank 0's next all_reduce must fail within the timeout (plus the store's look-up of who
// did not arrive) with a DistributedError naming the collective, its number and rank 1.
// Rank 0 prints the error and how long it took, and exits 3.
#include <signal.h>

#include <chrono>
#include <cstdio>

#include "distributed/distributed.h"
#include "loom.h"

namespace dist = loom::distributed;

int main() {
  dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(2)));
  int rank = dist::get_rank();
  loom::Tensor t = loom::full({4}, 1.0f);
  dist::all_reduce(t)->wait();  // #0, together
  if (rank == 1) ::raise(SIGSTOP);
  auto start = std::chrono::steady_clock::now();
  try {
    dist::all_reduce(t)->wait();  // #1: rank 1 is stopped
  } catch (const dist::DistributedError& e) {
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "rank %d failed after %.1f s: %s\n", rank, took.count(), e.what());
    return 3;
  }
  std::fprintf(stderr, "rank %d: the all_reduce with a stopped peer succeeded\n", rank);
  return 0;
}
