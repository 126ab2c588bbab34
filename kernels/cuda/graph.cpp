// CUDA graphs (core/cuda_graph.h, Note [CUDA graph capture]): capture on a side stream into
// a private pool of the caching allocator, instantiate, replay.
#include <cuda_runtime.h>

#include <atomic>
#include <exception>
#include <vector>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/factories.h"
#include "core/generator.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/philox_args.h"

namespace loom::cuda {

namespace detail {
int checked_device(int index, const char* what);        // kernels/cuda/device.cpp
MempoolId create_graph_pool(int device);                // kernels/cuda/cuda_allocator.cpp
void retain_graph_pool(int device, MempoolId pool);
void release_graph_pool(int device, MempoolId pool);
void write_philox_state(void* state, uint64_t seed, uint64_t base, void* stream);  // kernels/cuda/graph_rng.cu

namespace {
// What this thread is capturing: the device (-1: nothing) and the pool its allocations go to.
struct ThreadCapture {
  int device = -1;
  MempoolId pool = 0;
  // Note [graph-safe random numbers]: the graph's device words, the default generator's
  // seed and offset at capture_begin, and whether a captured kernel reads the words.
  const uint64_t* rng_state = nullptr;
  uint64_t rng_seed = 0, rng_start = 0;
  bool rng_used = false;
};
thread_local ThreadCapture this_thread;
std::atomic<int> captures_underway{0};  // on any device, by any thread
}  // namespace

// For the caching allocator: the pool this thread's allocations on `device` go to (0: the
// default pool), and whether any capture is underway (then no segment may be freed).
MempoolId capture_pool(int device) { return this_thread.device == device ? this_thread.pool : 0; }
bool capture_underway() { return captures_underway.load() > 0; }

void check_not_capturing(const char* op) {
  LOOM_CHECK(this_thread.device < 0, CaptureError, op,
             ": not allowed while this thread is capturing a CUDA graph: it would wait for the GPU, or a replay "
             "could not repeat it (Note [CUDA graph capture]); move it out of the captured region");
}
PhiloxArgs philox_args(int device, uint64_t seed, uint64_t offset, const char* op) {
  if (this_thread.device < 0 || this_thread.device != device) return {seed, offset, nullptr};
  // A range reserved from the default generator since capture_begin, at its seed then.
  const Generator& g = default_generator();
  LOOM_CHECK(seed == this_thread.rng_seed && offset >= this_thread.rng_start && offset < g.offset(), CaptureError, op,
             ": while capturing a CUDA graph, random numbers must come from the default generator, not reseeded "
             "during the capture (Note [graph-safe random numbers]); this draw uses seed ", seed, " counter ", offset,
             ", the capture began at seed ", this_thread.rng_seed, " counter ", this_thread.rng_start);
  this_thread.rng_used = true;
  return {seed, offset - this_thread.rng_start, this_thread.rng_state};
}
}  // namespace detail

bool is_current_stream_capturing() { return detail::this_thread.device >= 0; }

namespace {
cudaStream_t as_cuda(void* stream) { return static_cast<cudaStream_t>(stream); }

// This thread's side stream for captures on `device`: made once and kept, as every Loom
// stream is (Note [current stream]).
Stream capture_stream(int device) {
  thread_local std::vector<Stream> streams;
  if (streams.size() <= size_t(device)) streams.resize(size_t(device) + 1);
  if (streams[size_t(device)].handle() == nullptr) streams[size_t(device)] = Stream::create(device);
  return streams[size_t(device)];
}
}  // namespace

CUDAGraph::~CUDAGraph() {
  try {
    reset();
  } catch (...) {  // a destructor must not throw; the pool's memory returns with the process
  }
}

void CUDAGraph::capture_begin(MempoolId pool) {
  LOOM_CHECK(!capturing_ && exec_ == nullptr, ValueError, "CUDAGraph::capture_begin: the graph is ",
             capturing_ ? "being captured" : "captured already", "; reset() it first");
  LOOM_CHECK(!is_current_stream_capturing(), CaptureError,
             "CUDAGraph::capture_begin: this thread is capturing another graph");
  const int device = detail::checked_device(-1, "CUDAGraph::capture_begin");
  const Stream stream = Stream::current(device);
  LOOM_CHECK(stream.handle() != nullptr, ValueError,
             "CUDAGraph::capture_begin: the current stream is the default stream, which cannot be captured; "
             "capture on a side stream (cuda::GraphCapture makes one, as torch.cuda.graph does)");
  MempoolId id = pool;
  if (pool == 0)
    id = detail::create_graph_pool(device);
  else
    detail::retain_graph_pool(device, pool);
  const cudaError_t status = cudaStreamBeginCapture(as_cuda(stream.handle()), cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    detail::release_graph_pool(device, id);
    LOOM_CUDA_CHECK(status);
  }
  device_ = device;
  stream_ = stream.handle();
  pool_ = id;
  capturing_ = true;
  detail::this_thread = {device, id};
  ++detail::captures_underway;
  // The device words of Note [graph-safe random numbers], from the graph's pool: allocating
  // records nothing on the stream.
  rng_state_ = std::make_shared<Tensor>(empty({2}, TensorOptions(kInt64).device(Device(DeviceType::CUDA, device))));
  const Generator& g = default_generator();
  rng_start_ = g.offset();
  rng_used_ = false;
  rng_increment_ = 0;
  detail::this_thread.rng_state = static_cast<const uint64_t*>(rng_state_->data());
  detail::this_thread.rng_seed = g.seed();
  detail::this_thread.rng_start = rng_start_;
}

// The capture only recorded its draws: the counters it reserved go back to the generator,
// and each replay reserves as many (Note [graph-safe random numbers]).
static uint64_t give_back_counters(uint64_t start) {
  Generator& g = default_generator();
  const uint64_t end = g.offset();
  if (end < start) return 0;  // reseeded meanwhile: the draws were refused (CaptureError)
  g.rewind(end, start);
  return end - start;
}

// The end of a capture, whatever its outcome: this thread records no more.
static void stop_recording(int device) {
  if (detail::this_thread.device == device) detail::this_thread = {};
  --detail::captures_underway;
}

void CUDAGraph::capture_end() {
  LOOM_CHECK(capturing_, ValueError, "CUDAGraph::capture_end: no capture_begin() before it");
  LOOM_CHECK(detail::this_thread.device == device_, ValueError,
             "CUDAGraph::capture_end: called from another thread than capture_begin()");
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(as_cuda(stream_), &graph);
  capturing_ = false;
  rng_used_ = detail::this_thread.rng_used;
  rng_increment_ = give_back_counters(rng_start_);
  stop_recording(device_);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated =
      status == cudaSuccess && graph != nullptr ? cudaGraphInstantiate(&exec, graph, 0) : cudaErrorUnknown;
  if (graph && cudaGraphDestroy(graph) != cudaSuccess) (void)cudaGetLastError();
  if (status != cudaSuccess || instantiated != cudaSuccess) {
    (void)cudaGetLastError();
    release_pool();
    const cudaError_t cause = status != cudaSuccess ? status : instantiated;
    throw CaptureError(loom::detail::str("CUDAGraph::capture_end: the capture could not be ",
                                   status != cudaSuccess ? "completed" : "instantiated", " (", cudaGetErrorName(cause),
                                   ": ", cudaGetErrorString(cause),
                                   "); something that cannot be captured ran on the capturing stream or thread"));
  }
  exec_ = exec;
}

void CUDAGraph::abandon_capture() {
  DeviceGuard guard(device_);
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(as_cuda(stream_), &graph) != cudaSuccess) (void)cudaGetLastError();
  if (graph && cudaGraphDestroy(graph) != cudaSuccess) (void)cudaGetLastError();
  capturing_ = false;
  give_back_counters(rng_start_);
  stop_recording(device_);
  release_pool();
}

void CUDAGraph::release_pool() {
  rng_state_.reset();  // before the pool it came from
  rng_used_ = false;
  if (pool_) {
    detail::release_graph_pool(device_, pool_);
    pool_ = 0;
  }
}

void CUDAGraph::replay() {
  LOOM_CHECK(exec_ != nullptr, ValueError, "CUDAGraph::replay: nothing captured (no capture_end(), or reset())");
  detail::check_not_capturing("CUDAGraph::replay");
  DeviceGuard guard(device_);
  void* stream = Stream::current(device_).handle();
  if (rng_used_) {  // this replay's draws: fresh counters of the default generator, at its seed now
    Generator& g = default_generator();
    const uint64_t seed = g.seed();
    detail::write_philox_state(rng_state_->data(), seed, g.reserve(rng_increment_), stream);
  }
  LOOM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_cuda(stream)));
}

void CUDAGraph::reset() {
  if (capturing_) abandon_capture();
  if (exec_) {
    DeviceGuard guard(device_);
    // A replay still running finishes first: CUDA defers the destruction.
    LOOM_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_)));
    exec_ = nullptr;
  }
  release_pool();
}

GraphCapture::GraphCapture(CUDAGraph& graph, MempoolId pool)
    : graph_(graph), exceptions_(std::uncaught_exceptions()) {
  device_ = detail::checked_device(-1, "cuda::GraphCapture");
  const Stream previous = Stream::current(device_);
  const Stream side = capture_stream(device_);
  Event ready;  // the side stream starts after what is queued on the current one
  ready.record(previous);
  ready.wait(side);
  guard_.emplace(side);
  graph_.capture_begin(pool);  // on failure guard_ restores the previous stream
}

GraphCapture::~GraphCapture() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_) {
    try {
      if (graph_.capturing()) graph_.abandon_capture();
    } catch (...) {  // the exception already leaving the scope is the one to report
    }
    return;  // guard_ makes the previous stream current again
  }
  graph_.capture_end();
  // Later work on the previous stream sees what the side stream did (warm-up work queued
  // there before capture_begin, for one).
  Event done;
  done.record(Stream::current(device_));
  guard_.reset();
  done.wait(Stream::current(device_));
}

}  // namespace loom::cuda
