// ProcessGroupNCCL (distributed/process_group_nccl.h). Compiled only when CMake found both
// the CUDA backend and NCCL; process_group_nccl_stub.cpp stands in otherwise. Streams,
// events and guards are core/cuda.h's; the one library called directly is NCCL.
#include "distributed/process_group_nccl.h"

#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/cuda.h"
#include "core/factories.h"
#include "distributed/arrivals.h"
#include "distributed/error.h"
#include "distributed/rendezvous.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 13, 0)
#error "the nccl backend needs NCCL 2.13 or newer (ncclGetLastError, ncclAvg, ncclBfloat16)"
#endif

namespace loom::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// NCCL's calls are checked as LOOM_CUDA_CHECK checks CUDA's (kernels/cuda/check.h, which
// nothing above kernels/ includes): the call, where it was made, NCCL's name of the error
// and its last message, which says what went wrong (a peer's address, a version mismatch).
[[noreturn]] void throw_nccl_error(ncclResult_t status, ncclComm_t comm, const char* call, const char* func,
                                   const char* file, int line) {
  throw DistributedError(detail::str(call, " failed in ", func, " (", file, ":", line,
                                     "): ", ncclGetErrorString(status), ": ", ncclGetLastError(comm)));
}

#define LOOM_NCCL_CHECK(call, comm)                                                       \
  do {                                                                                    \
    const ncclResult_t loom_status_ = (call);                                             \
    if (loom_status_ != ncclSuccess) [[unlikely]]                                         \
      throw_nccl_error(loom_status_, (comm), #call, __func__, __FILE__, __LINE__);        \
  } while (0)

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Bool: break;  // refused by check_tensor
  }
  LOOM_ASSERT(false, "no NCCL type for dtype ", dtype);
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;  // floating-point only: check_reduce
    case ReduceOp::MAX: return ncclMax;
    case ReduceOp::MIN: return ncclMin;
  }
  LOOM_ASSERT(false, "unknown ReduceOp");
}

// This rank's GPU: `requested`, or the current device for -1.
int rank_device(int requested, int rank) {
  LOOM_CHECK(cuda::is_available(), DeviceError, "ProcessGroupNCCL: rank ", rank,
             " has no usable CUDA device (the nccl backend needs one GPU per rank; gloo takes CPU tensors)");
  if (requested == -1) return cuda::current_device();
  const int count = cuda::device_count();
  LOOM_CHECK(requested >= 0 && requested < count, DeviceError, "ProcessGroupNCCL: rank ", rank, " asks for cuda:",
             requested, " (LOCAL_RANK) but ", count, " CUDA device", count == 1 ? " is" : "s are",
             " visible (one GPU per rank: at most that many ranks per machine; check CUDA_VISIBLE_DEVICES)");
  return requested;
}

// "all_reduce (nccl, SUM) of a (2, 3) float32 tensor on cuda:0": what a failure names.
std::string describe(const char* op, const Tensor& t, const std::string& extra = "") {
  return detail::str(op, " (nccl", extra.empty() ? "" : ", ", extra, ") of a ", shape_str(t.sizes()), " ",
                     t.dtype(), " tensor on ", t.device());
}

// The communicator, shared by the group and its Works (a Work may outlive its group).
struct Comm {
  std::mutex mutex;             // guards the members below; held while a collective is queued
  ncclComm_t handle = nullptr;  // null once destroyed or aborted
  std::string failure;          // why it was aborted; empty while healthy
  const void* culprit = nullptr;  // the collective that failed
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<Arrivals> arrivals;  // who entered which collective (Note [who did not arrive])

  // Stops the communicator's queued kernels and frees it; later collectives throw `why`.
  void abort_locked(std::string why, const void* failed) {
    if (handle != nullptr) (void)ncclCommAbort(handle);  // nothing more to do if it fails
    handle = nullptr;
    failure = std::move(why);
    culprit = failed;
  }
};

// One collective in flight: its end event on the group's stream, and the tensors it uses
// (kept alive until it has run: Note [nccl streams]).
struct Pending {
  std::string what;
  uint32_t seq = 0;  // the collective's number on this group: 0, 1, ... in call order
  std::vector<Tensor> tensors;
  Clock::time_point deadline;
  cuda::Event end;  // made on the group's device (the constructor runs under its guard)
};

class NCCLWork : public Work {
 public:
  NCCLWork(std::shared_ptr<Comm> comm, std::shared_ptr<Pending> pending)
      : comm_(std::move(comm)), pending_(std::move(pending)) {}

  void wait() const override {
    std::string failure;
    for (int spin = 0;; ++spin) {
      if (poll(failure) != State::Running) break;
      // Short collectives finish within microseconds: yield first, then stop burning a core.
      if (spin < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    if (!failure.empty()) throw DistributedError(failure);
  }

  bool is_completed() const override {
    std::string failure;
    return poll(failure) != State::Running;
  }

 private:
  enum class State { Done, Running, Failed };

  // Done, still running, or failed (failure: the message wait() throws). A timeout or an
  // error NCCL reports aborts the communicator here.
  State poll(std::string& failure) const {
    if (pending_->end.query()) return State::Done;
    std::lock_guard<std::mutex> lock(comm_->mutex);
    if (comm_->failure.empty()) {
      ncclResult_t async = ncclSuccess;
      if (comm_->handle != nullptr) {
        const ncclResult_t status = ncclCommGetAsyncError(comm_->handle, &async);
        if (status != ncclSuccess) async = status;
      }
      if (comm_->handle == nullptr) {
        comm_->failure = "the group was destroyed first";
      } else if (async != ncclSuccess && async != ncclInProgress) {
        comm_->abort_locked(detail::str(pending_->what, " failed on rank ", comm_->rank, " of ", comm_->size, ": ",
                                        ncclGetErrorString(async), ": ", ncclGetLastError(comm_->handle),
                                        " (the communicator was aborted)"),
                            pending_.get());
      } else if (Clock::now() >= pending_->deadline) {
        comm_->abort_locked(detail::str(pending_->what, " #", pending_->seq, " timed out after ", comm_->timeout.count(),
                                        " ms on rank ", comm_->rank, " of ", comm_->size, ": ",
                                        comm_->arrivals->missing(pending_->seq),
                                        " (every rank must call the same collectives in the same order, with "
                                        "the same sizes; the communicator was aborted)"),
                            pending_.get());
      } else {
        return State::Running;
      }
    }
    failure = comm_->culprit == pending_.get()
                  ? comm_->failure
                  : detail::str(pending_->what, " did not complete: the group failed before: ", comm_->failure);
    return State::Failed;
  }

  std::shared_ptr<Comm> comm_;
  std::shared_ptr<Pending> pending_;
};

}  // namespace

bool is_nccl_available() { return true; }
std::string nccl_unavailable_reason() { return ""; }

struct ProcessGroupNCCL::Impl {
  // Queues NCCL's calls for one collective; tensors it makes go into `made`.
  using Launch = std::function<void(ncclComm_t comm, cudaStream_t stream, std::vector<Tensor>& made)>;

  std::shared_ptr<TCPStore> store;
  std::shared_ptr<Comm> comm = std::make_shared<Comm>();
  int device = 0;
  cuda::Stream stream;  // the group's own (Note [nccl streams])
  cuda::Event ready;    // marks the caller's stream before each collective
  std::mutex mutex;     // one collective queued at a time, so every rank sees the same order
  std::vector<std::shared_ptr<Pending>> in_flight;
  uint32_t next_seq = 0;

  // Runs launch on the group's stream after the work queued on the caller's current stream.
  std::shared_ptr<Work> run(std::string what, std::vector<Tensor> keep, const Launch& launch) {
    std::lock_guard<std::mutex> lock(mutex);
    cuda::DeviceGuard guard(device);
    std::erase_if(in_flight, [](const std::shared_ptr<Pending>& p) { return p->end.query(); });
    auto pending = std::make_shared<Pending>();
    std::exception_ptr failed;
    {
      std::lock_guard<std::mutex> comm_lock(comm->mutex);  // a Work's abort must not free it meanwhile
      LOOM_CHECK(comm->failure.empty(), DistributedError, what, ": the group failed before: ", comm->failure);
      pending->seq = next_seq++;
      comm->arrivals->enter(pending->seq);
      ready.record(cuda::Stream::current(device));
      ready.wait(stream);
      cuda::StreamGuard on_group_stream(stream);  // buffers and copies below belong to it
      NoGradGuard no_grad;                        // copies into outputs record no graph
      try {
        launch(comm->handle, static_cast<cudaStream_t>(stream.handle()), keep);
      } catch (...) {
        failed = std::current_exception();  // what was queued before the failure still uses keep
      }
      pending->end.record(stream);
    }
    pending->what = std::move(what);
    pending->tensors = std::move(keep);
    pending->deadline = Clock::now() + comm->timeout;
    in_flight.push_back(pending);
    if (failed) std::rethrow_exception(failed);
    return std::make_shared<NCCLWork>(comm, std::move(pending));
  }

  // Waits for what is in flight (aborting on a timeout), then frees the communicator.
  ~Impl() {
    for (const auto& p : in_flight) {
      try {
        NCCLWork(comm, p).wait();
      } catch (const std::exception&) {
        // failed: the communicator is aborted already
      }
    }
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->handle == nullptr) return;
    try {
      cuda::DeviceGuard guard(device);  // NCCL frees the communicator's memory on its device
      (void)ncclCommDestroy(comm->handle);  // a destructor cannot throw
    } catch (const std::exception&) {
    }
    comm->handle = nullptr;
  }
};

ProcessGroupNCCL::ProcessGroupNCCL(std::shared_ptr<TCPStore> store, int rank, int size,
                                   ProcessGroupNCCLOptions options)
    : ProcessGroup(rank, size, Device(DeviceType::CUDA, rank_device(options.device_, rank))) {
  LOOM_CHECK(store != nullptr, ValueError, "ProcessGroupNCCL: no store");
  cuda::DeviceGuard guard(device());  // the events and the stream are made on this rank's GPU
  impl_ = std::make_unique<Impl>();
  impl_->store = std::move(store);
  impl_->device = device().index;
  impl_->stream = cuda::Stream::create(impl_->device);
  impl_->comm->rank = rank;
  impl_->comm->size = size;
  impl_->comm->timeout = options.timeout_;
  impl_->comm->arrivals = std::make_unique<Arrivals>(impl_->store, "loom/nccl", rank, size);
  TCPStore& s = *impl_->store;

  join_group(s, "loom/nccl", "ProcessGroupNCCL", rank, size);  // Note [rendezvous], steps 1 and 2
  // Step 3: NCCL's own bootstrap, from the unique id rank 0 publishes.
  ncclUniqueId id;
  if (rank == 0) {
    LOOM_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    s.set("loom/nccl/unique_id", std::vector<char>(id.internal, id.internal + sizeof id.internal));
  }
  std::vector<char> bytes = s.get("loom/nccl/unique_id");
  LOOM_CHECK(bytes.size() == sizeof id.internal, DistributedError, "ProcessGroupNCCL: rank 0 published a ",
             bytes.size(), "-byte NCCL id, expected ", sizeof id.internal, " (ranks built with different NCCLs?)");
  std::memcpy(id.internal, bytes.data(), bytes.size());
  s.set("loom/nccl/joined/" + std::to_string(rank), {});
  std::vector<std::string> joined;
  for (int r = 0; r < size; ++r) joined.push_back("loom/nccl/joined/" + std::to_string(r));
  s.wait(joined, options.timeout_);  // every rank is here: NCCL's bootstrap will not wait for one that never comes

  ncclComm_t handle = nullptr;
  const ncclResult_t status = ncclCommInitRank(&handle, size, id, rank);
  LOOM_CHECK(status == ncclSuccess, DistributedError, "ProcessGroupNCCL: rank ", rank, " of ", size,
             " could not set up NCCL on ", device(), ": ", ncclGetErrorString(status), ": ",
             ncclGetLastError(nullptr));
  impl_->comm->handle = handle;
}

ProcessGroupNCCL::~ProcessGroupNCCL() = default;  // Impl's destructor waits and frees

std::shared_ptr<Work> ProcessGroupNCCL::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_all_reduce(tensor, op);
  return impl_->run(describe("all_reduce", tensor, reduce_op_name(op)), {tensor},
                    [tensor, op](ncclComm_t comm, cudaStream_t stream, std::vector<Tensor>&) {
                      if (tensor.numel() == 0) return;  // the same on every rank (same sizes)
                      LOOM_NCCL_CHECK(ncclAllReduce(tensor.data(), tensor.data(), size_t(tensor.numel()),
                                                    nccl_dtype(tensor.dtype()), nccl_op(op), comm, stream),
                                      comm);
                    });
}

std::shared_ptr<Work> ProcessGroupNCCL::broadcast(const Tensor& tensor, int root) {
  check_broadcast(tensor, root);
  return impl_->run(describe("broadcast", tensor, "root " + std::to_string(root)), {tensor},
                    [tensor, root](ncclComm_t comm, cudaStream_t stream, std::vector<Tensor>&) {
                      if (tensor.numel() == 0) return;
                      LOOM_NCCL_CHECK(ncclBroadcast(tensor.data(), tensor.data(), size_t(tensor.numel()),
                                                    nccl_dtype(tensor.dtype()), root, comm, stream),
                                      comm);
                    });
}

std::shared_ptr<Work> ProcessGroupNCCL::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_all_gather(outputs, input);
  std::vector<Tensor> keep = outputs;
  keep.push_back(input);
  return impl_->run(describe("all_gather", input), std::move(keep),
                    [outputs, input](ncclComm_t comm, cudaStream_t stream, std::vector<Tensor>& made) {
                      const int64_t n = input.numel();
                      if (n == 0) return;
                      const int64_t ranks = int64_t(outputs.size());
                      // (ranks · n): rank r's input at [r·n, (r+1)·n)
                      Tensor flat = empty({ranks * n}, TensorOptions(input.dtype()).device(input.device()));
                      made.push_back(flat);
                      LOOM_NCCL_CHECK(ncclAllGather(input.data(), flat.data(), size_t(n),
                                                    nccl_dtype(input.dtype()), comm, stream),
                                      comm);
                      for (int64_t r = 0; r < ranks; ++r) outputs[size_t(r)].view({n}).copy_(flat.narrow(0, r * n, n));
                    });
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                                       ReduceOp op) {
  check_reduce_scatter(output, inputs, op);
  std::vector<Tensor> keep = inputs;
  keep.push_back(output);
  return impl_->run(describe("reduce_scatter", output, reduce_op_name(op)), std::move(keep),
                    [output, inputs, op](ncclComm_t comm, cudaStream_t stream, std::vector<Tensor>& made) {
                      const int64_t n = output.numel();
                      if (n == 0) return;
                      const int64_t ranks = int64_t(inputs.size());
                      // (ranks · n): inputs[r] at [r·n, (r+1)·n); rank r's result is the op over its row r
                      Tensor flat = empty({ranks * n}, TensorOptions(output.dtype()).device(output.device()));
                      made.push_back(flat);
                      for (int64_t r = 0; r < ranks; ++r) flat.narrow(0, r * n, n).copy_(inputs[size_t(r)].view({n}));
                      LOOM_NCCL_CHECK(ncclReduceScatter(flat.data(), output.data(), size_t(n),
                                                        nccl_dtype(output.dtype()), nccl_op(op), comm, stream),
                                      comm);
                    });
}

std::shared_ptr<Work> ProcessGroupNCCL::barrier() {
  const Device dev = device();
  return impl_->run(detail::str("barrier (nccl) on ", dev), {},
                    [dev](ncclComm_t comm, cudaStream_t stream, std::vector<Tensor>& made) {
                      Tensor token = zeros({1}, TensorOptions(kInt32).device(dev));
                      made.push_back(token);
                      LOOM_NCCL_CHECK(ncclAllReduce(token.data(), token.data(), 1, ncclInt32, ncclSum, comm, stream),
                                      comm);
                    });
}

}  // namespace loom::distributed
