// ProcessGroupNCCL: the ProcessGroup over NCCL, for CUDA tensors, one GPU per rank.
//
// The constructor is the rendezvous: steps 1 and 2 of Note [rendezvous]
// (distributed/tcp_store.h) under "loom/nccl", then rank 0 makes an ncclUniqueId and
// publishes it in the store, every rank reads it and waits (within the timeout) until all
// ranks have, and ncclCommInitRank connects them on this rank's GPU. The wait is there so
// that a rank that never comes fails in the store, with the store's timeout, rather than
// inside NCCL's own bootstrap, which has none of ours.
//
// Note [nccl streams]
// Each collective runs on the group's own CUDA stream, after the work queued so far on the
// caller's current stream (an event), so that the caller's stream computes on while NCCL
// communicates. Work::wait() blocks the host until the collective has run (it polls the
// collective's end event), so whatever the caller queues after wait() sees the result.
// It throws DistributedError, naming the op, shapes, dtype and device, when NCCL reports an
// asynchronous error (ncclCommGetAsyncError) or the group's timeout has passed since the
// call; either aborts the communicator (ncclCommAbort, which stops its queued kernels), and
// every later collective of the group throws too. Timeouts are noticed by wait() and
// is_completed() only: a collective nobody waits for is timed out by the destructor.
// The group keeps each collective's tensors alive until it has run: the caching allocator
// hands a freed block out again on the stream that allocated it (Note [caching allocator
// design]), which does not wait for the group's stream.
//
// Dtypes: every Loom dtype but Bool, natively (float16 and bfloat16 included); AVG is
// ncclAvg. all_gather and reduce_scatter run NCCL's allgather and reducescatter on a flat
// buffer of size() tensors, copied from the inputs or into the outputs on the group's
// stream.
//
// Without the CUDA backend, or with it but without NCCL (CMakeLists.txt), is_nccl_available()
// is false and the constructor throws a DistributedError that says which
// (distributed/process_group_nccl_stub.cpp). NCCL's headers stay in process_group_nccl.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/process_group.h"
#include "distributed/tcp_store.h"

namespace loom::distributed {

struct ProcessGroupNCCLOptions {
  // The limit of the rendezvous and of each collective (PyTorch's default too).
  std::chrono::milliseconds timeout_ = std::chrono::minutes(30);
  // This rank's GPU; -1: the current device (init_process_group passes LOCAL_RANK).
  int device_ = -1;

  ProcessGroupNCCLOptions& timeout(std::chrono::milliseconds t) { timeout_ = t; return *this; }
  ProcessGroupNCCLOptions& device(int index) { device_ = index; return *this; }
};

// Whether this build has the NCCL backend, and if not, why (empty when it has).
bool is_nccl_available();
std::string nccl_unavailable_reason();

class ProcessGroupNCCL : public ProcessGroup {
 public:
  ProcessGroupNCCL(std::shared_ptr<TCPStore> store, int rank, int size, ProcessGroupNCCLOptions options = {});
  // Waits for the collectives in flight (at most the timeout), then destroys the communicator.
  ~ProcessGroupNCCL() override;

  std::string backend() const override { return "nccl"; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM) override;
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0) override;
  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::SUM) override;
  // An all_reduce of one element on this rank's GPU; wait() returns once every rank is in.
  std::shared_ptr<Work> barrier() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::distributed
