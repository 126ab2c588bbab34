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

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {
  LOOM_CHECK(size >= 1, DistributedError, "ProcessGroup: world size must be at least 1, got ", size);
  LOOM_CHECK(rank >= 0 && rank < size, DistributedError, "ProcessGroup: rank ", rank,
             " is not in [0, ", size, ") (the world size)");
}

void ProcessGroup::check_tensor(const char* op, const Tensor& t) const {
  LOOM_CHECK(t.defined(), ValueError, op, ": got an undefined tensor");
  LOOM_CHECK(t.is_cpu(), DeviceError, op, ": the ", backend(), " backend takes CPU tensors, got a tensor on ",
             t.device(), " of shape ", shape_str(t.sizes()));
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

}  // namespace loom::distributed
