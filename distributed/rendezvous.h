// join_group: steps 1 and 2 of Note [rendezvous] (distributed/tcp_store.h), which every
// backend takes before connecting its ranks its own way.
#pragma once

#include <string>

#include "distributed/tcp_store.h"

namespace loom::distributed {

// Claims `rank` under "<prefix>/rank/<rank>" and checks `size` against rank 0's under
// "<prefix>/world_size" (a prefix per backend, so that two groups can share a store). A
// duplicate rank or a world-size mismatch is a DistributedError that starts with `who`.
void join_group(TCPStore& store, const std::string& prefix, const std::string& who, int rank, int size);

}  // namespace loom::distributed
