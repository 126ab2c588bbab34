// The device API of a build without the CUDA backend (core/cuda.h): nothing is available,
// and whatever needs a GPU says that Loom was built without CUDA — unless the host-emulated
// device is on (core/cuda_emulation.h): then cuda:0 exists, its work is done by the time
// it is queued (so synchronizing and streams are no-ops), and its memory stats count the
// emulated allocations. Compiled only in such a build (CMakeLists.txt).
#include <chrono>
#include <cstdint>

#include "core/allocator.h"
#include "core/cuda.h"
#include "core/cuda_emulation.h"
#include "core/cuda_graph.h"
#include "core/error.h"

namespace loom::cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(std::string("cuda::") + what +
                    ": Loom was built without CUDA support (configure with the 'cuda' preset, "
                    "or -DLOOM_ENABLE_CUDA=ON, on a machine with nvcc)");
}

// The device index `index` names (-1: the current one, 0), for the emulated device.
int emulated_device(int index, const char* what) {
  if (!emulated()) no_cuda(what);
  LOOM_CHECK(index == -1 || index == 0, DeviceError, "cuda::", what, ": CUDA device index ", index,
             " is out of range (1 device visible: the host-emulated cuda:0)");
  return 0;
}
}  // namespace

bool is_available() { return emulated(); }
int device_count() { return emulated() ? 1 : 0; }
std::string device_name(int index) {
  emulated_device(index, "device_name");
  return "host-emulated CUDA device (no GPU)";
}
void synchronize(int index) {
  emulated_device(index, "synchronize");
  emulation::count_host_sync();
}
uint64_t host_sync_count() { return emulation::host_syncs(); }  // 0 unless the device was emulated
int current_device() { return emulated_device(-1, "current_device"); }
void set_device(int index) { emulated_device(index, "set_device"); }

DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cuda()) emulated_device(device.index, "DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;

size_t memory_allocated(int index) {
  emulated_device(index, "memory_allocated");
  return emulation::allocated();
}
size_t max_memory_allocated(int index) {
  emulated_device(index, "max_memory_allocated");
  return emulation::max_allocated();
}
size_t memory_reserved(int index) {  // nothing is cached: what is allocated
  emulated_device(index, "memory_reserved");
  return emulation::allocated();
}
size_t max_memory_reserved(int index) {
  emulated_device(index, "max_memory_reserved");
  return emulation::max_allocated();
}
void reset_peak_memory_stats(int index) {
  emulated_device(index, "reset_peak_memory_stats");
  emulation::reset_peak();
}
void empty_cache() {}  // nothing cached, as torch.cuda.empty_cache() without CUDA

namespace {
bool tf32 = false;
}
void set_allow_tf32(bool allow) { tf32 = allow; }
bool allow_tf32() { return tf32; }

// The emulated device has only its default stream (Stream(): the null handle, device 0).
Stream Stream::create(int) { no_cuda("Stream::create"); }
Stream Stream::current(int index) {
  emulated_device(index, "Stream::current");
  return Stream();
}
Stream Stream::default_stream(int index) {
  emulated_device(index, "Stream::default_stream");
  return Stream();
}
void Stream::synchronize() const {
  emulated_device(device_, "Stream::synchronize");
  emulation::count_host_sync();
}
bool Stream::query() const { return emulated_device(device_, "Stream::query") == 0; }

StreamGuard::StreamGuard(const Stream& stream) { emulated_device(stream.device(), "StreamGuard"); }
StreamGuard::~StreamGuard() = default;

// The emulated device's work is done by the time it is queued, so an event completes when it
// is recorded: it holds the host's steady-clock time of its last record() (in handle_), and
// elapsed_ms is the host time between two records, as the profiler's GPU timing reads it.
namespace {
int64_t* recorded_at(void* handle) { return static_cast<int64_t*>(handle); }
}  // namespace

// The device check comes first: a DeviceError must not leave the handle behind.
Event::Event(bool enable_timing) : timing_(enable_timing), device_(emulated_device(-1, "Event")) {
  handle_ = new int64_t(-1);
}
Event::~Event() { delete recorded_at(handle_); }
Event::Event(Event&& o) noexcept : handle_(o.handle_), timing_(o.timing_), device_(o.device_) { o.handle_ = nullptr; }
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    delete recorded_at(handle_);
    handle_ = o.handle_;
    timing_ = o.timing_;
    device_ = o.device_;
    o.handle_ = nullptr;
  }
  return *this;
}
void Event::record(const Stream& stream) {
  emulated_device(stream.device(), "Event::record");
  LOOM_CHECK(handle_ != nullptr, ValueError, "cuda::Event::record: the event was moved from");
  *recorded_at(handle_) = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
}
void Event::wait(const Stream& stream) const { emulated_device(stream.device(), "Event::wait"); }
void Event::synchronize() const {
  emulated_device(device_, "Event::synchronize");
  emulation::count_host_sync();
}
bool Event::query() const { return emulated_device(device_, "Event::query") == 0; }
float Event::elapsed_ms(const Event& end) const {
  emulated_device(device_, "Event::elapsed_ms");
  LOOM_CHECK(handle_ != nullptr && end.handle_ != nullptr, ValueError, "cuda::Event::elapsed_ms: an event was moved from");
  LOOM_CHECK(timing_ && end.timing_, ValueError, "Event::elapsed_ms: both events must be made with enable_timing");
  LOOM_CHECK(*recorded_at(handle_) >= 0 && *recorded_at(end.handle_) >= 0, ValueError,
             "Event::elapsed_ms: both events must have been recorded");
  return float(double(*recorded_at(end.handle_) - *recorded_at(handle_)) * 1e-6);
}

// CUDA graphs need a GPU: the emulated device runs each op as it is queued, so there is
// nothing to record. Nothing is ever captured, so reset() and the destructor have nothing to do.
CUDAGraph::~CUDAGraph() = default;
void CUDAGraph::capture_begin(MempoolId) { no_cuda("CUDAGraph::capture_begin"); }
void CUDAGraph::capture_end() { no_cuda("CUDAGraph::capture_end"); }
void CUDAGraph::replay() { no_cuda("CUDAGraph::replay"); }
void CUDAGraph::reset() {}
void CUDAGraph::abandon_capture() {}
GraphCapture::GraphCapture(CUDAGraph& graph, MempoolId) : graph_(graph) { no_cuda("GraphCapture"); }
GraphCapture::~GraphCapture() noexcept(false) = default;
bool is_current_stream_capturing() { return false; }

namespace detail {  // core/allocator.h
void check_not_capturing(const char*) {}
Allocator* device_allocator() { return emulated() ? emulation::allocator() : nullptr; }
Allocator* pinned_allocator() { return nullptr; }
bool is_pinned(const void*) { return false; }
}  // namespace detail

}  // namespace loom::cuda
