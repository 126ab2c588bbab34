// The device API of core/cuda.h in a CUDA build: devices, guards, streams, events and the
// TF32 switch. The memory statistics and empty_cache() live with the caching allocator
// (kernels/cuda/cuda_allocator.cpp).
//
// Note [current stream]
// Each thread has its own current stream per device, as in PyTorch; it starts as the
// device's default stream, which is the legacy default stream (the null handle): work on
// it is ordered with all blocking streams of the device. Stream::create() makes
// cudaStreamNonBlocking streams, which do not implicitly wait for the default stream (use
// events); they are never destroyed, as PyTorch's stream pool keeps its streams for the
// life of the process, so a Stream handle can be copied freely.
#include <cuda_runtime.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_check.cuh"
#include "kernels/cuda/host_sync.h"

namespace loom::cuda {

namespace {

struct DeviceProbe {
  int count = 0;
  std::string reason;  // why there is none, when count == 0
};

// Asked once: the answer does not change while the process runs.
const DeviceProbe& probe() {
  static const DeviceProbe result = [] {
    DeviceProbe p;
    const cudaError_t status = cudaGetDeviceCount(&p.count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      p.count = 0;
      p.reason = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    } else if (p.count == 0) {
      p.reason = "the CUDA runtime reports 0 devices";
    }
    return p;
  }();
  return result;
}

// This thread's current stream of each device (nullptr: the default stream).
std::vector<void*>& current_streams() {
  thread_local std::vector<void*> streams(size_t(probe().count), nullptr);
  return streams;
}

std::atomic<bool> tf32{false};

// true when the work is done, false while it is pending; other statuses throw.
bool query_status(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: do not leave it for the next check
    return false;
  }
  detail::throw_cuda_error(status, call, __func__, __FILE__, __LINE__);
}

}  // namespace

namespace detail {

// The device index `index` names (-1: the current device), checked: DeviceError when
// there is no device or the index is out of range. `what` names the caller in the message.
int checked_device(int index, const char* what) {
  const DeviceProbe& p = probe();
  LOOM_CHECK(p.count > 0, DeviceError, what, ": no CUDA device found (", p.reason, ")");
  if (index == -1) {
    int current = 0;
    LOOM_CUDA_CHECK(cudaGetDevice(&current));
    return current;
  }
  LOOM_CHECK(index >= 0 && index < p.count, DeviceError, what, ": CUDA device index ", index,
             " is out of range (", p.count, " device", p.count == 1 ? "" : "s", " visible)");
  return index;
}

}  // namespace detail

using detail::checked_device;

bool is_available() { return probe().count > 0; }

int device_count() { return probe().count; }

std::string device_name(int index) {
  const int device = checked_device(index, "cuda::device_name");
  cudaDeviceProp props{};
  LOOM_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  return props.name;
}

void synchronize(int index) {
  const int device = checked_device(index, "cuda::synchronize");
  DeviceGuard guard(device);
  detail::check_not_capturing("cuda::synchronize");
  kernels::cuda::synchronize_device();
  kernels::cuda::raise_device_check_failure(device, "cuda::synchronize");
}

int current_device() { return checked_device(-1, "cuda::current_device"); }

// -1 (the current device) is a no-op, as a negative index in torch.cuda.set_device.
void set_device(int index) { LOOM_CUDA_CHECK(cudaSetDevice(checked_device(index, "cuda::set_device"))); }

DeviceGuard::DeviceGuard(Device device) {
  if (!device.is_cuda()) return;
  const int target = checked_device(device.index, "cuda::DeviceGuard");
  const int current = current_device();
  if (target == current) return;
  LOOM_CUDA_CHECK(cudaSetDevice(target));
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  // Destructors must not throw; a device that was current a moment ago can be again.
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

void set_allow_tf32(bool allow) { tf32.store(allow); }
bool allow_tf32() { return tf32.load(); }

// ---- streams ------------------------------------------------------------------------------

Stream Stream::create(int device) {
  const int index = checked_device(device, "cuda::Stream::create");
  DeviceGuard guard(index);
  cudaStream_t stream = nullptr;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream, index);
}

Stream Stream::current(int device) {
  const int index = checked_device(device, "cuda::Stream::current");
  return Stream(current_streams()[size_t(index)], index);
}

Stream Stream::default_stream(int device) {
  return Stream(nullptr, checked_device(device, "cuda::Stream::default_stream"));
}

void Stream::synchronize() const {
  detail::check_not_capturing("cuda::Stream::synchronize");
  DeviceGuard guard(device_);  // the null handle means the current device's default stream
  kernels::cuda::synchronize_stream(static_cast<cudaStream_t>(handle_));
  kernels::cuda::raise_device_check_failure(device_, "cuda::Stream::synchronize");
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  return query_status(cudaStreamQuery(static_cast<cudaStream_t>(handle_)), "cudaStreamQuery");
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(Stream::current(stream.device())) {
  current_streams()[size_t(stream.device())] = stream.handle();
}

StreamGuard::~StreamGuard() { current_streams()[size_t(previous_.device())] = previous_.handle(); }

// ---- events -------------------------------------------------------------------------------

namespace {
cudaEvent_t make_event(bool timing) {
  cudaEvent_t event = nullptr;
  LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return event;
}
}  // namespace

Event::Event(bool enable_timing) : timing_(enable_timing), device_(checked_device(-1, "cuda::Event")) {
  handle_ = make_event(timing_);
}

Event::~Event() {
  if (handle_ && cudaEventDestroy(static_cast<cudaEvent_t>(handle_)) != cudaSuccess) (void)cudaGetLastError();
}

Event::Event(Event&& o) noexcept : handle_(o.handle_), timing_(o.timing_), device_(o.device_) { o.handle_ = nullptr; }

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_ && cudaEventDestroy(static_cast<cudaEvent_t>(handle_)) != cudaSuccess) (void)cudaGetLastError();
    handle_ = o.handle_;
    timing_ = o.timing_;
    device_ = o.device_;
    o.handle_ = nullptr;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  LOOM_CHECK(handle_ != nullptr, ValueError, "cuda::Event::record: the event was moved from");
  DeviceGuard guard(stream.device());
  // CUDA records an event only on a stream of the device it was made on: for another
  // device, a new event replaces it (waits already queued keep the old one alive).
  if (stream.device() != device_) {
    cudaEvent_t fresh = make_event(timing_);
    if (cudaEventDestroy(static_cast<cudaEvent_t>(handle_)) != cudaSuccess) (void)cudaGetLastError();
    handle_ = fresh;
    device_ = stream.device();
  }
  LOOM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream.handle())));
}

void Event::wait(const Stream& stream) const {
  LOOM_CHECK(handle_ != nullptr, ValueError, "cuda::Event::wait: the event was moved from");
  DeviceGuard guard(stream.device());
  LOOM_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()), static_cast<cudaEvent_t>(handle_), 0));
}

void Event::synchronize() const {
  LOOM_CHECK(handle_ != nullptr, ValueError, "cuda::Event::synchronize: the event was moved from");
  detail::check_not_capturing("cuda::Event::synchronize");
  kernels::cuda::synchronize_event(static_cast<cudaEvent_t>(handle_));
  kernels::cuda::raise_device_check_failure(device_, "cuda::Event::synchronize");
}

bool Event::query() const {
  LOOM_CHECK(handle_ != nullptr, ValueError, "cuda::Event::query: the event was moved from");
  return query_status(cudaEventQuery(static_cast<cudaEvent_t>(handle_)), "cudaEventQuery");
}

float Event::elapsed_ms(const Event& end) const {
  LOOM_CHECK(handle_ != nullptr && end.handle_ != nullptr, ValueError,
             "cuda::Event::elapsed_ms: an event was moved from");
  LOOM_CHECK(timing_ && end.timing_, ValueError,
             "cuda::Event::elapsed_ms: both events must be created with enable_timing = true");
  float ms = 0.0f;
  LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)));
  return ms;
}

}  // namespace loom::cuda
