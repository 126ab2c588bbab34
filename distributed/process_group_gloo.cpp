#include "distributed/process_group_gloo.h"

#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "core/half.h"
#include "distributed/arrivals.h"
#include "distributed/error.h"
#include "distributed/rendezvous.h"

namespace loom::distributed {

namespace {

// memcpy that allows the null data pointers of empty tensors (memcpy itself may not be
// given null, even for 0 bytes).
void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}


// Lets Gloo's connectFullMesh rendezvous through a TCPStore.
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(TCPStore& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout);
  }

 private:
  TCPStore& store_;
};

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string this_hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Calls f(T{}) with the C++ type Gloo reduces for dtype (bfloat16 has none: see reduce()).
template <typename F>
void dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Float16: return f(gloo::float16{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: LOOM_ASSERT(false, "no Gloo type for dtype ", dtype);
  }
}

template <typename T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return static_cast<Fn>(&gloo::sum<T>);
    case ReduceOp::MAX: return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::MIN: return static_cast<Fn>(&gloo::min<T>);
  }
  LOOM_ASSERT(false, "unknown ReduceOp");
}

}  // namespace

struct ProcessGroupGloo::Impl {
  std::shared_ptr<TCPStore> store;
  std::unique_ptr<Arrivals> arrivals;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::chrono::milliseconds timeout;
  int size = 1;

  // The worker: runs the queued collectives one at a time, in order. Tags number them
  // (the same on every rank, since every rank queues the same collectives).
  std::thread worker;
  std::mutex mutex;
  std::condition_variable queued;
  std::deque<std::packaged_task<void()>> queue;
  bool stopping = false;
  uint32_t next_tag = 0;

  void run_worker() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        queued.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping, and nothing left
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();  // an exception lands in the Work's future
    }
  }

  // Queues fn(tag) as the collective op; Gloo's errors come out of wait() as DistributedError.
  // The error names the collective, its number and the ranks that never entered it (Note
  // [who did not arrive], distributed/arrivals.h).
  std::shared_ptr<Work> enqueue(std::string op, std::function<void(uint32_t)> fn) {
    std::lock_guard<std::mutex> lock(mutex);
    uint32_t tag = next_tag++;
    std::packaged_task<void()> task([this, op = std::move(op), fn = std::move(fn), tag] {
      arrivals->enter(tag);
      try {
        fn(tag);
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        throw DistributedError(op + " #" + std::to_string(tag) + " (gloo, timeout " + std::to_string(timeout.count()) +
                               " ms) failed: " + e.what() + "; " + arrivals->missing(tag));
      }
    });
    auto work = std::make_shared<Work>(task.get_future().share());
    queue.push_back(std::move(task));
    queued.notify_one();
    return work;
  }

  // data (n elements of dtype) := op over the ranks, in place.
  void reduce(void* data, DType dtype, size_t n, ReduceOp op, uint32_t tag) {
    if (n == 0) return;
    if (dtype == kBFloat16) {  // Gloo has no bfloat16: reduce in float32, round back
      auto* b = static_cast<BFloat16*>(data);
      std::vector<float> wide(b, b + n);
      reduce(wide.data(), kFloat32, n, op, tag);
      for (size_t i = 0; i < n; ++i) b[i] = BFloat16(wide[i]);
      return;
    }
    dispatch(dtype, [&](auto zero) {
      using T = decltype(zero);
      gloo::AllreduceOptions opts(context);
      opts.setOutput(static_cast<T*>(data), n);  // no input: the output is reduced in place
      opts.setReduceFunction(reduce_function<T>(op));
      opts.setTag(tag);
      opts.setTimeout(timeout);
      gloo::allreduce(opts);
    });
    if (op == ReduceOp::AVG) {
      if (dtype == kFloat32) {
        for (float* p = static_cast<float*>(data); p != static_cast<float*>(data) + n; ++p) *p /= float(size);
      } else if (dtype == kFloat64) {
        for (double* p = static_cast<double*>(data); p != static_cast<double*>(data) + n; ++p) *p /= double(size);
      } else {  // float16 (gloo::float16 and loom::Half are both the IEEE bits)
        for (Half* p = static_cast<Half*>(data); p != static_cast<Half*>(data) + n; ++p) *p = Half(float(*p) / float(size));
      }
    }
  }
};

// Gloo's TCP transport writes to its peers' sockets without MSG_NOSIGNAL, so a peer that
// died would kill this rank with SIGPIPE (exit 141) before the failure could be reported
// (and before loomrun saw the rank that failed first). Like Python, which every torchrun
// rank runs under, a process with the default SIGPIPE action ignores it from here on: the
// write fails with EPIPE and Gloo raises an error instead. A handler the program set stays.
static void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<TCPStore> store, int rank, int size,
                                   ProcessGroupGlooOptions options)
    : ProcessGroup(rank, size, kCPU), impl_(std::make_unique<Impl>()) {
  LOOM_CHECK(store != nullptr, ValueError, "ProcessGroupGloo: no store");
  ignore_sigpipe_unless_handled();
  impl_->store = std::move(store);
  impl_->timeout = options.timeout_;
  impl_->size = size;
  TCPStore& s = *impl_->store;

  join_group(s, "loom", "ProcessGroupGloo", rank, size);  // Note [rendezvous], steps 1 and 2
  impl_->arrivals = std::make_unique<Arrivals>(impl_->store, "loom/gloo", rank, size);

  // Step 3: Gloo connects every pair of ranks.
  gloo::transport::tcp::attr attr;
  if (!options.iface_.empty()) {
    attr.iface = options.iface_;
  } else if (!options.hostname_.empty()) {
    attr.hostname = options.hostname_;
  } else {
    attr.hostname = is_loopback(s.host()) ? "127.0.0.1" : this_hostname();
  }
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    impl_->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    impl_->context->setTimeout(impl_->timeout);
    GlooStore adapter(s);
    gloo::rendezvous::PrefixStore prefixed("loom/gloo", adapter);
    impl_->context->connectFullMesh(prefixed, device);
    // Every rank is done with the store's rendezvous keys once all have passed this.
    gloo::BarrierOptions barrier(impl_->context);
    barrier.setTimeout(impl_->timeout);
    gloo::barrier(barrier);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError("ProcessGroupGloo: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                           " could not connect to the others: " + e.what());
  }
  impl_->worker = std::thread([impl = impl_.get()] { impl->run_worker(); });
}

ProcessGroupGloo::~ProcessGroupGloo() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->queued.notify_one();
  if (impl_->worker.joinable()) impl_->worker.join();
}

std::shared_ptr<Work> ProcessGroupGloo::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_all_reduce(tensor, op);
  return impl_->enqueue("all_reduce", [impl = impl_.get(), tensor, op](uint32_t tag) {
    impl->reduce(tensor.data(), tensor.dtype(), size_t(tensor.numel()), op, tag);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::broadcast(const Tensor& tensor, int root) {
  check_broadcast(tensor, root);
  return impl_->enqueue("broadcast", [impl = impl_.get(), tensor, root](uint32_t tag) {
    if (tensor.nbytes() == 0) return;
    gloo::BroadcastOptions opts(impl->context);
    opts.setOutput(static_cast<uint8_t*>(tensor.data()), tensor.nbytes());  // any dtype: its bytes
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(impl->timeout);
    gloo::broadcast(opts);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_all_gather(outputs, input);
  return impl_->enqueue("all_gather", [impl = impl_.get(), outputs, input](uint32_t tag) {
    size_t bytes = input.nbytes();
    if (bytes == 0) return;
    std::vector<uint8_t> gathered(bytes * outputs.size());  // (size, bytes): rank r's input in row r
    gloo::AllgatherOptions opts(impl->context);
    opts.setInput(static_cast<uint8_t*>(input.data()), bytes);
    opts.setOutput(gathered.data(), gathered.size());
    opts.setTag(tag);
    opts.setTimeout(impl->timeout);
    gloo::allgather(opts);
    for (size_t r = 0; r < outputs.size(); ++r) copy_bytes(outputs[r].data(), gathered.data() + r * bytes, bytes);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                                       ReduceOp op) {
  check_reduce_scatter(output, inputs, op);
  return impl_->enqueue("reduce_scatter", [impl = impl_.get(), output, inputs, op, rank = rank()](uint32_t tag) {
    size_t bytes = output.nbytes();
    // (size, n): inputs[r] in row r; after the allreduce, row rank() is this rank's result.
    std::vector<char> all(bytes * inputs.size());
    for (size_t r = 0; r < inputs.size(); ++r) copy_bytes(all.data() + r * bytes, inputs[r].data(), bytes);
    impl->reduce(all.data(), output.dtype(), size_t(output.numel()) * inputs.size(), op, tag);
    copy_bytes(output.data(), all.data() + size_t(rank) * bytes, bytes);
  });
}

std::shared_ptr<Work> ProcessGroupGloo::barrier() {
  return impl_->enqueue("barrier", [impl = impl_.get()](uint32_t tag) {
    gloo::BarrierOptions opts(impl->context);
    opts.setTag(tag);
    opts.setTimeout(impl->timeout);
    gloo::barrier(opts);
  });
}

}  // namespace loom::distributed
