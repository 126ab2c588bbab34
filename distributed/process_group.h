// ProcessGroup: the collectives a data-parallel job needs, over the ranks 0..size()-1 of
// one group. Each call checks its arguments at once (throwing ValueError, DeviceError,
// DTypeError or ShapeError that name the op, the shapes and the dtypes), then queues the
// collective and returns a Work handle; the group runs its collectives one at a time, in
// the order they were called, on its own thread. Every rank must call the same
// collectives in the same order with tensors of the same sizes and dtype.
//
// Tensors are written in place: they must be contiguous tensors on the group's device()
// (the CPU for Gloo, this rank's GPU for NCCL), and must stay unmodified (and un-read, for
// outputs) until wait() returns. A collective that fails (a peer went away, the group's
// timeout passed) throws DistributedError from wait().
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loom::distributed {

// How all_reduce and reduce_scatter combine the ranks' values. AVG is SUM divided by the
// group size (floating-point dtypes only).
enum class ReduceOp { SUM, AVG, MAX, MIN };

std::string reduce_op_name(ReduceOp op);

// The handle of one queued collective: a future of the group's thread (Gloo), or a
// subclass that watches a GPU stream (NCCL, distributed/process_group_nccl.cpp).
class Work {
 public:
  explicit Work(std::shared_future<void> done) : done_(std::move(done)) {}
  virtual ~Work() = default;
  // Blocks until the collective has run; rethrows its error.
  virtual void wait() const { done_.get(); }
  // True once it has run or failed (wait() then returns or throws at once).
  virtual bool is_completed() const;

 protected:
  Work() = default;

 private:
  std::shared_future<void> done_;
};

class ProcessGroup {
 public:
  // device: where the backend's tensors live (check_tensor holds every tensor to it).
  ProcessGroup(int rank, int size, Device device = kCPU);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }
  virtual std::string backend() const = 0;

  // tensor := op over the ranks of their tensors (same sizes and dtype on every rank).
  virtual std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM) = 0;
  // tensor := root's tensor.
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0) = 0;
  // outputs[r] := rank r's input; size() outputs, each with input's sizes and dtype.
  virtual std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output := op over the ranks of their inputs[rank()]; size() inputs, each with output's
  // sizes and dtype.
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                               ReduceOp op = ReduceOp::SUM) = 0;
  // Returns (from wait()) once every rank has entered the barrier.
  virtual std::shared_ptr<Work> barrier() = 0;

 protected:
  // The argument checks of each collective, the same for every backend.
  void check_all_reduce(const Tensor& tensor, ReduceOp op) const;
  void check_broadcast(const Tensor& tensor, int root) const;
  void check_all_gather(const std::vector<Tensor>& outputs, const Tensor& input) const;
  void check_reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) const;
  // Their parts; op names the collective in the message.
  void check_tensor(const char* op, const Tensor& t) const;
  void check_same(const char* op, const Tensor& expected, const Tensor& t, const char* what) const;
  void check_count(const char* op, size_t count, const char* what) const;
  void check_root(const char* op, int root) const;
  void check_reduce(const char* op, const Tensor& t, ReduceOp reduce) const;

 private:
  int rank_;
  int size_;
  Device device_;
};

}  // namespace loom::distributed
