// The device API of a build without the CUDA backend (core/cuda.h): nothing is available,
// and whatever needs a GPU says that Loom was built without CUDA.
#ifndef LOOM_WITH_CUDA

#include "core/cuda.h"
#include "core/error.h"

namespace loom::cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(std::string("cuda::") + what +
                    ": Loom was built without CUDA support (configure with the 'cuda' preset, "
                    "or -DLOOM_ENABLE_CUDA=ON, on a machine with nvcc)");
}
}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
std::string device_name(int) { no_cuda("device_name"); }
void synchronize(int) { no_cuda("synchronize"); }
int current_device() { no_cuda("current_device"); }
void set_device(int) { no_cuda("set_device"); }

DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cuda()) no_cuda("DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;

size_t memory_allocated(int) { no_cuda("memory_allocated"); }
size_t max_memory_allocated(int) { no_cuda("max_memory_allocated"); }
size_t memory_reserved(int) { no_cuda("memory_reserved"); }
size_t max_memory_reserved(int) { no_cuda("max_memory_reserved"); }
void reset_peak_memory_stats(int) { no_cuda("reset_peak_memory_stats"); }
void empty_cache() {}  // nothing cached, as torch.cuda.empty_cache() without CUDA

namespace {
bool tf32 = false;
}
void set_allow_tf32(bool allow) { tf32 = allow; }
bool allow_tf32() { return tf32; }

Stream Stream::create(int) { no_cuda("Stream::create"); }
Stream Stream::current(int) { no_cuda("Stream::current"); }
Stream Stream::default_stream(int) { no_cuda("Stream::default_stream"); }
void Stream::synchronize() const { no_cuda("Stream::synchronize"); }
bool Stream::query() const { no_cuda("Stream::query"); }

StreamGuard::StreamGuard(const Stream&) { no_cuda("StreamGuard"); }
StreamGuard::~StreamGuard() = default;

Event::Event(bool) { no_cuda("Event"); }
Event::~Event() = default;
Event::Event(Event&& o) noexcept : handle_(o.handle_), timing_(o.timing_), device_(o.device_) { o.handle_ = nullptr; }
Event& Event::operator=(Event&& o) noexcept {
  handle_ = o.handle_;
  timing_ = o.timing_;
  device_ = o.device_;
  o.handle_ = nullptr;
  return *this;
}
void Event::record(const Stream&) { no_cuda("Event::record"); }
void Event::wait(const Stream&) const { no_cuda("Event::wait"); }
void Event::synchronize() const { no_cuda("Event::synchronize"); }
bool Event::query() const { no_cuda("Event::query"); }
float Event::elapsed_ms(const Event&) const { no_cuda("Event::elapsed_ms"); }

}  // namespace loom::cuda

#endif  // LOOM_WITH_CUDA
