// What Loom's code marks for the profiler, and the session that collects the marks
// (profiler::Profile in train/profiler/profile.h runs a session and writes its table and traces).
//
//   { profiler::Range range("data augmentation"); ... }  // as torch.profiler.record_function
//
// Note [profiler recording]
// Off (the default), every mark costs one relaxed atomic load and a branch that predicts
// "off": the router's kernel calls (kernels/support/recorded_kernel.h), the autograd engine's nodes,
// optimizer steps, the DataLoader and user Ranges all test is_recording() first and do
// nothing else. On, a mark is an RAII frame on its thread: opening it reads the steady clock
// and pushes it on the thread's stack of open frames; closing it reads the clock again, pops
// it and appends one complete Event to the thread's log (under a mutex that only the owner
// and stop() take, so never contended in a step). A frame's parent is the innermost frame
// open on its thread when it opened, which is what self times and per-op memory are computed
// from afterwards. An exception unwinding through a frame closes it like any other end, and
// the event says so (`unwound`), so a step that threw still leaves a valid trace.
//
// An op on a CUDA device also records a pair of timing events on its device's current stream
// when it opens and closes. They are read once, when the session stops: one synchronize per
// device there and none in the step. The host clock and the GPU's are aligned at that point
// too: after the synchronize, a last event recorded on the idle device completes at once, so
// its GPU time is the host's now, and every other event is placed by its elapsed time to that
// one (its duration by the elapsed time between its own two events, which keeps the precise
// figure however long the session ran).
//
// With profile_memory, every storage made or freed (core/storage.h) appends a record naming
// the innermost open frame of the thread that made or freed it: an op's self memory is what
// was allocated minus what was freed while it was the innermost frame, as PyTorch counts it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"

namespace loom::profiler {

// What an event marks: the trace's category and the timeline's colour.
enum class EventKind : uint8_t {
  Op,            // a kernel entry point of the router ("loom::mul", "loom::bmm")
  BackwardNode,  // an autograd node run by backward(), named as PyTorch names it ("MulBackward0")
  Annotation,    // Loom's own ranges: optimizer steps and zero_grad, the DataLoader's batches
  UserRange,     // a profiler::Range
  Step,          // ProfilerStep#N: one step of a scheduled Profile
};

// One closed frame.
struct Event {
  const char* name = "";  // a string literal or an interned copy: valid for the whole process
  EventKind kind = EventKind::Op;
  uint32_t thread = 0;               // index into Recording::threads
  uint64_t id = 0;                   // unique in the session, never 0
  uint64_t parent = 0;               // the frame that was open around it on its thread; 0: none
  int64_t begin_ns = 0, end_ns = 0;  // steady clock
  Device device = kCPU;              // an op's device; the CPU for everything else
  bool unwound = false;              // closed by an exception passing through it
  // An op on a CUDA device: when its work ran on the GPU (the span between its two timing
  // events, on the steady clock; -1: none) and on which stream; the host time spent
  // recording the first event (the "cudaEventRecord" of the trace's runtime row).
  int64_t gpu_begin_ns = -1, gpu_end_ns = -1;
  uint64_t stream = 0;
  int64_t record_begin_ns = 0, record_end_ns = 0;
  // With record_shapes: the inputs as JSON lists, e.g. [[32, 128], [128], []] and
  // ["float32", "float32", "Scalar"] (an argument that is not a tensor: [] and "Scalar" or "").
  std::string input_shapes, input_dtypes;

  int64_t duration_ns() const { return end_ns - begin_ns; }
  bool has_gpu_time() const { return gpu_begin_ns >= 0; }
};

// A storage made (bytes > 0) or freed (bytes < 0).
struct MemoryRecord {
  int64_t ns = 0;
  uint32_t thread = 0;
  uint64_t event = 0;  // the innermost frame open on that thread; 0: none
  uint64_t addr = 0;
  int64_t bytes = 0;
  Device device = kCPU;
  int64_t total_allocated = 0;  // the device's bytes in live tensors just after
};

struct ThreadInfo {
  uint64_t os_tid = 0;  // the kernel's thread id
  std::string name;     // set_thread_name's, or "thread <os_tid>"
};

// What a session recorded.
struct Recording {
  int64_t begin_ns = 0, end_ns = 0;  // steady clock
  int64_t begin_unix_ns = 0;         // the wall clock when it began
  std::vector<Event> events;         // by begin time (ties: the outer frame first)
  std::vector<MemoryRecord> memory;  // by time
  std::vector<ThreadInfo> threads;
  bool record_shapes = false, profile_memory = false;
};

struct SessionOptions {
  bool record_shapes = false;   // the inputs' shapes and dtypes of every op
  bool profile_memory = false;  // every storage made and freed
};

namespace detail {
inline constexpr uint32_t kRecording = 1, kShapes = 2, kMemory = 4;
inline std::atomic<uint32_t> flags{0};

// Starts recording on every thread; ValueError when a session is recording already (one at
// a time, as torch.profiler).
void start(const SessionOptions& options);
// Stops recording and returns what was recorded (an empty Recording when none was on).
// Synchronizes each CUDA device that ran a recorded op.
Recording stop();
}  // namespace detail

// The one check on every mark's path (Note [profiler recording]).
inline bool is_recording() noexcept { return detail::flags.load(std::memory_order_relaxed) & detail::kRecording; }
inline bool is_recording_shapes() noexcept {
  return (detail::flags.load(std::memory_order_relaxed) & (detail::kRecording | detail::kShapes)) ==
         (detail::kRecording | detail::kShapes);
}
inline bool is_recording_memory() noexcept {
  return (detail::flags.load(std::memory_order_relaxed) & (detail::kRecording | detail::kMemory)) ==
         (detail::kRecording | detail::kMemory);
}

// A copy of `name` that lives as long as the process (one per distinct name).
const char* intern(std::string_view name);

// Names this thread in traces ("DataLoader worker 1"); unnamed threads are "thread <tid>".
void set_thread_name(std::string name);

// An RAII frame of Loom's own code: `name` must outlive the process (a literal, an op table's
// entry, or intern()'s). Records nothing when no session is on.
class ScopedEvent {
 public:
  ScopedEvent(const char* name, EventKind kind, Device device = kCPU) {
    if (is_recording()) open(name, kind, device);
  }
  ~ScopedEvent() {
    if (id_ != 0) close();
  }
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;

  bool recording() const { return id_ != 0; }
  // The inputs as JSON lists (Event::input_shapes); only when recording.
  void set_inputs(std::string shapes, std::string dtypes);
  // With profile_memory: the storage at `addr`, if this thread made it since its last op
  // closed, is this op's output, and its allocation counts as this op's. (An op's outputs are
  // allocated by the Tensor method just before it calls the kernel, outside the op's event;
  // PyTorch counts them in the op, and so does Loom's table.)
  void adopt_allocation(const void* addr);

 private:
  void open(const char* name, EventKind kind, Device device);
  void close() noexcept;
  uint64_t id_ = 0;
};

// A user's named range, as torch.profiler.record_function: every op inside it is its child.
class Range {
 public:
  explicit Range(std::string_view name) : event_(is_recording() ? intern(name) : "", EventKind::UserRange) {}

 private:
  ScopedEvent event_;
};

// The allocation hook of core/storage.h: records a storage made or freed.
void record_memory(const void* addr, int64_t bytes, Device device);

}  // namespace loom::profiler
