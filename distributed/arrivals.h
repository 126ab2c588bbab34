// Arrivals: which ranks reached a collective, for the error of one that timed out.
//
// Note [who did not arrive]
// Before each collective every rank sets "<prefix>/entered/<rank>" to the number of
// collectives it has entered (a SET: no reply to wait for). When a collective fails, e.g.
// after its timeout because a peer stopped or died, missing(seq) reads the others' counts
// and names the ranks that never entered it, with the last one they did enter. Each read is
// bounded (a WAIT of 100 ms, then CANCEL_WAIT with its 5 s grace), and the first that finds
// the store silent ends the search: rank 0, which serves it, may be the one that stopped.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "distributed/tcp_store.h"

namespace loom::distributed {

class Arrivals {
 public:
  Arrivals(std::shared_ptr<TCPStore> store, std::string prefix, int rank, int size)
      : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), size_(size) {}

  // This rank enters collective number seq (0, 1, ... in the order they were called).
  void enter(uint32_t seq);
  // "ranks 1, 3 did not arrive (their last collective: #4, none)", or what the store allowed to find.
  std::string missing(uint32_t seq);

 private:
  std::string key(int rank) const { return prefix_ + "/entered/" + std::to_string(rank); }
  std::shared_ptr<TCPStore> store_;
  std::string prefix_;
  int rank_, size_;
};

}  // namespace loom::distributed
