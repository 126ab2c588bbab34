// CUDA graphs, as torch.cuda.CUDAGraph and `with torch.cuda.graph(g):`.
//
//   cuda::CUDAGraph graph;
//   Tensor static_x = randn({64, 128}).to(kCUDA), static_y;
//   {
//     cuda::GraphCapture capture(graph);     // a side stream, then capture_begin()
//     static_y = model->forward(static_x);   // queued work is recorded, not run
//   }                                        // capture_end(): instantiated
//   static_x.copy_(next_batch);              // new inputs go into the captured tensors
//   graph.replay();                          // one launch runs all the recorded kernels
//
// Note [CUDA graph capture]
// A capture records what this thread queues on the capturing stream; nothing runs until
// replay(), which launches the whole recording with one call, on the addresses it was
// captured with. So
// - memory: the blocks allocated while capturing come from a private pool of the caching
//   allocator (Note [private pools] in core/caching_allocator.h) that lives as long as
//   the graph, so no other tensor is ever given the graph's scratch space; pass another
//   graph's pool() to capture_begin to share one pool between graphs replayed in order.
// - what cannot be recorded is a typed CaptureError naming the op, raised before the CUDA
//   call that would break the capture: a host sync (cuda::synchronize, a stream's or an
//   event's synchronize, a copy to or from ordinary host memory, so item() too),
//   empty_cache(), multinomial and attention with dropout (their Philox seed and offset are
//   fixed at launch, so every replay would draw the same numbers). The capture is then
//   abandoned: the guard or reset() ends it, and the process and the device stay usable.
// - random numbers (dropout, rand, randn, bernoulli, randint) from the default generator
//   are graph-safe: each replay draws fresh ones, exactly those the same step would draw
//   eagerly (Note [graph-safe random numbers] in kernels/cuda/philox_args.h).
// - the capture mode is cudaStreamCaptureModeThreadLocal, so other threads (DataLoader
//   workers pinning batches) are free to call CUDA meanwhile; the allocator's cudaMalloc
//   runs in relaxed mode (allowed while capturing, as long as the memory is never freed
//   before the graph is: the pool sees to that).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/cuda.h"

namespace loom {
class Tensor;
}

namespace loom::cuda {

// A private pool of the device's caching allocator; 0 means "a new one".
using MempoolId = uint64_t;

class CUDAGraph {
 public:
  CUDAGraph() = default;
  ~CUDAGraph();  // reset(), abandoning a capture left open
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  // Starts recording the work this thread queues on its current stream, which must not be
  // the default stream (GraphCapture makes a side stream). `pool`: 0 for a private pool
  // of its own, or another graph's pool() to share that one.
  void capture_begin(MempoolId pool = 0);
  // Ends the recording and instantiates it. CaptureError if the capture was broken (then
  // the graph is as before capture_begin).
  void capture_end();
  void replay();  // on this thread's current stream of the graph's device
  // Frees the graph and gives up its pool (its blocks return to the device as their last
  // tensors are freed). A graph can be captured again after it.
  void reset();

  MempoolId pool() const { return pool_; }
  bool captured() const { return exec_ != nullptr; }
  bool capturing() const { return capturing_; }
  int device() const { return device_; }

 private:
  void abandon_capture();  // ends an open capture, discarding what it recorded
  void release_pool();     // drops the random-number words, then gives the pool up
  friend class GraphCapture;

  void* exec_ = nullptr;    // cudaGraphExec_t
  void* stream_ = nullptr;  // the capturing stream (cudaStream_t)
  int device_ = -1;
  MempoolId pool_ = 0;
  bool capturing_ = false;
  // Note [graph-safe random numbers]: the device words {seed, base} the captured random
  // kernels read (in the graph's pool), written before each replay that needs them.
  std::shared_ptr<Tensor> rng_state_;  // (2,) int64 on the graph's device
  uint64_t rng_start_ = 0;      // the default generator's offset at capture_begin
  uint64_t rng_increment_ = 0;  // counters one replay reserves
  bool rng_used_ = false;       // a captured kernel reads rng_state_
};

// `with torch.cuda.graph(graph, pool):` — makes a fresh side stream current (after the
// work already queued on the current one), begins the capture; the destructor ends it,
// abandons it when an exception is leaving the scope, and makes the previous stream wait
// for the side stream and current again.
class GraphCapture {
 public:
  explicit GraphCapture(CUDAGraph& graph, MempoolId pool = 0);
  ~GraphCapture() noexcept(false);
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

 private:
  CUDAGraph& graph_;
  std::optional<StreamGuard> guard_;  // the side stream, current while capturing
  int device_ = -1;
  int exceptions_ = 0;  // std::uncaught_exceptions() at construction
};

// Whether this thread is capturing a graph (torch.cuda.is_current_stream_capturing()).
bool is_current_stream_capturing();

namespace detail {
// CaptureError naming `op` when this thread is capturing: for the calls that a capture
// cannot record (Note [CUDA graph capture]).
void check_not_capturing(const char* op);
}  // namespace detail

}  // namespace loom::cuda
