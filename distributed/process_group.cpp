#include "distributed/process_group.h"

#include <chrono>

#include "distributed/error.h"

namespace loom::distributed {

std::string reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::MIN: return "MIN";
  }
  return "?";
}

bool Work::is_completed() const {
  return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

ProcessGroup::ProcessGroup(int rank, int size, Device device) : rank_(rank), size_(size), device_(device) {
  LOOM_CHECK(size >= 1, DistributedError, "ProcessGroup: world size must be at least 1, got ", size);
  LOOM_CHECK(rank >= 0 && rank < size, DistributedError, "ProcessGroup: rank ", rank,
             " is not in [0, ", size, ") (the world size)");
}

void ProcessGroup::check_tensor(const char* op, const Tensor& t) const {
  LOOM_CHECK(t.defined(), ValueError, op, ": got an undefined tensor");
  LOOM_CHECK(t.device().type == device_.type, DeviceError, op, ": the ", backend(), " backend takes ",
             device_.is_cpu() ? "CPU" : "CUDA", " tensors, got a tensor on ", t.device(), " of shape ",
             shape_str(t.sizes()), " (dtype ", t.dtype(), ")");
  // One GPU per rank (NCCL): every tensor on the device the group's communicator uses.
  LOOM_CHECK(t.device() == device_, DeviceError, op, ": this rank's ", backend(), " group is on ", device_,
             ", got a tensor on ", t.device(), " of shape ", shape_str(t.sizes()),
             " (one GPU per rank; LOCAL_RANK picks it)");
  LOOM_CHECK(t.is_contiguous(), ValueError, op, ": the tensor of shape ", shape_str(t.sizes()),
             " is not contiguous (collectives write in place; pass t.contiguous() and copy back)");
  LOOM_CHECK(t.dtype() != kBool, DTypeError, op, ": Bool tensors are not supported (shape ",
             shape_str(t.sizes()), ")");
}

void ProcessGroup::check_same(const char* op, const Tensor& expected, const Tensor& t, const char* what) const {
  check_tensor(op, t);
  LOOM_CHECK(t.dtype() == expected.dtype(), DTypeError, op, ": ", what, " has dtype ", t.dtype(),
             ", expected ", expected.dtype());
  LOOM_CHECK(t.sizes() == expected.sizes(), ShapeError, op, ": ", what, " has shape ", shape_str(t.sizes()),
             ", expected ", shape_str(expected.sizes()));
}

void ProcessGroup::check_count(const char* op, size_t count, const char* what) const {
  LOOM_CHECK(count == size_t(size_), ValueError, op, ": got ", count, " ", what, " for a group of ", size_,
             " ranks (one per rank)");
}

void ProcessGroup::check_root(const char* op, int root) const {
  LOOM_CHECK(root >= 0 && root < size_, ValueError, op, ": root ", root, " is not a rank of this group of ",
             size_);
}

void ProcessGroup::check_reduce(const char* op, const Tensor& t, ReduceOp reduce) const {
  bool floating = t.dtype() == kFloat32 || t.dtype() == kFloat64 || t.dtype() == kFloat16 ||
                  t.dtype() == kBFloat16;
  LOOM_CHECK(reduce != ReduceOp::AVG || floating, DTypeError, op, ": ReduceOp::AVG needs a floating-point ",
             "tensor, got ", t.dtype(), " of shape ", shape_str(t.sizes()));
}

void ProcessGroup::check_all_reduce(const Tensor& tensor, ReduceOp op) const {
  check_tensor("all_reduce", tensor);
  check_reduce("all_reduce", tensor, op);
}

void ProcessGroup::check_broadcast(const Tensor& tensor, int root) const {
  check_tensor("broadcast", tensor);
  check_root("broadcast", root);
}

void ProcessGroup::check_all_gather(const std::vector<Tensor>& outputs, const Tensor& input) const {
  check_tensor("all_gather", input);
  check_count("all_gather", outputs.size(), "outputs");
  for (const Tensor& out : outputs) check_same("all_gather", input, out, "an output");
}

void ProcessGroup::check_reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) const {
  check_tensor("reduce_scatter", output);
  check_reduce("reduce_scatter", output, op);
  check_count("reduce_scatter", inputs.size(), "inputs");
  for (const Tensor& in : inputs) check_same("reduce_scatter", output, in, "an input");
}

}  // namespace loom::distributed
