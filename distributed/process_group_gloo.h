// ProcessGroupGloo: the ProcessGroup over Gloo's TCP transport (CPU tensors).
//
// The constructor is the rendezvous (Note [rendezvous] in distributed/tcp_store.h): it
// checks the rank and the world size against the other ranks' through the store, connects
// every pair of ranks with Gloo, and returns once all ranks have. The collectives are
// Gloo's own (allreduce, broadcast, allgather, barrier); reduce_scatter is an allreduce of
// the concatenated inputs of which each rank keeps its slice. Dtypes: float32, float64,
// float16 (gloo::float16), int32 and int64; bfloat16 is reduced in float32 and rounded
// back (broadcast and all_gather copy any dtype's bytes).
//
// Gloo's headers stay in process_group_gloo.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "distributed/tcp_store.h"

namespace loom::distributed {

struct ProcessGroupGlooOptions {
  // The limit of the rendezvous and of each collective (PyTorch's default too).
  std::chrono::milliseconds timeout_ = std::chrono::minutes(30);
  // The address the other ranks reach this rank at. Empty: 127.0.0.1 when the store's
  // host is a loopback address, else Gloo's choice (this machine's hostname).
  std::string hostname_;
  // The network interface to use instead (like GLOO_SOCKET_IFNAME), e.g. "eth0".
  std::string iface_;

  ProcessGroupGlooOptions& timeout(std::chrono::milliseconds t) { timeout_ = t; return *this; }
  ProcessGroupGlooOptions& hostname(std::string h) { hostname_ = std::move(h); return *this; }
  ProcessGroupGlooOptions& iface(std::string i) { iface_ = std::move(i); return *this; }
};

class ProcessGroupGloo : public ProcessGroup {
 public:
  ProcessGroupGloo(std::shared_ptr<TCPStore> store, int rank, int size,
                   ProcessGroupGlooOptions options = {});
  ~ProcessGroupGloo() override;  // runs the queued collectives first

  std::string backend() const override { return "gloo"; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM) override;
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0) override;
  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::SUM) override;
  std::shared_ptr<Work> barrier() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::distributed
