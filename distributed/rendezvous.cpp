#include "distributed/rendezvous.h"

#include "distributed/error.h"

namespace loom::distributed {

void join_group(TCPStore& store, const std::string& prefix, const std::string& who, int rank, int size) {
  int64_t claims = store.add(prefix + "/rank/" + std::to_string(rank), 1);
  LOOM_CHECK(claims == 1, DistributedError, who, ": duplicate rank ", rank, ": ", claims,
             " processes claim it (every process needs its own RANK in [0, WORLD_SIZE))");
  if (rank == 0) {
    std::string text = std::to_string(size);
    store.set(prefix + "/world_size", std::vector<char>(text.begin(), text.end()));
  }
  std::vector<char> text = store.get(prefix + "/world_size");
  int master_size = std::stoi(std::string(text.begin(), text.end()));
  LOOM_CHECK(master_size == size, DistributedError, who, ": world size mismatch: rank ", rank,
             " has world size ", size, " but rank 0 has ", master_size, " (check WORLD_SIZE of each process)");
}

}  // namespace loom::distributed
