// The device API, mirroring torch.cuda: is there a GPU, which one is current, how much
// memory the caching allocator holds, and streams and events for overlapping work.
//
// Declared in every build. With the CUDA backend (LOOM_WITH_CUDA) it is implemented in
// kernels/cuda/; without it, core/cuda_stub.cpp answers is_available() == false and
// device_count() == 0, and every call that needs a GPU throws a DeviceError saying that
// Loom was built without CUDA. In a CUDA build on a machine without a usable GPU the same
// calls throw a DeviceError saying no device was found (and why: the driver's message).
// CUDA_VISIBLE_DEVICES is honoured (the CUDA runtime applies it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"

namespace loom::cuda {

bool is_available();       // a CUDA build with at least one visible, working device
int device_count();        // 0 when none (never throws)
std::string device_name(int index = -1);  // -1: the current device
void synchronize(int index = -1);         // waits for all work on the device

// How many times Loom has made the host wait for a GPU since the process started: each
// copy to the host, blocking copy to a device, synchronize() of the device, a stream or an
// event, and the allocator's waits before it frees device memory. A training step should
// add none (docs/cuda.md, "A step without host syncs"); tests read it around one. On the
// host-emulated device (core/cuda_emulation.h) it counts the waits a GPU would have made.
// A wait that user code asked for also raises a failed deferred range check (Note [deferred
// device checks] in kernels/support/device_check.h).
uint64_t host_sync_count();
int current_device();
void set_device(int index);

// Makes `device` current for the guard's lifetime, as torch.cuda.device(...). A CPU
// device leaves the current device alone.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  explicit DeviceGuard(int index) : DeviceGuard(Device(DeviceType::CUDA, index)) {}
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The caching allocator's books, per device (-1: the current one).
size_t memory_allocated(int index = -1);      // bytes in live tensors
size_t max_memory_allocated(int index = -1);  // peak of that since start / the last reset
size_t memory_reserved(int index = -1);       // bytes held from the driver (live + cached)
size_t max_memory_reserved(int index = -1);
void reset_peak_memory_stats(int index = -1);
void empty_cache();                           // returns unused cached blocks to the driver

// TF32 tensor-core math for float32 matmuls: off by default, as
// torch.backends.cuda.matmul.allow_tf32 = False.
void set_allow_tf32(bool allow);
bool allow_tf32();

// A CUDA stream: an ordered queue of work on one device. Each device has a default
// stream; kernels launch on the current stream of their device (see StreamGuard).
class Stream {
 public:
  Stream() = default;                    // the null handle (the default stream)
  static Stream create(int device = -1);  // a new non-blocking stream
  static Stream current(int device = -1);
  static Stream default_stream(int device = -1);

  void synchronize() const;
  bool query() const;                    // true when all its work is done
  void* handle() const { return handle_; }  // cudaStream_t
  int device() const { return device_; }
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }

 private:
  Stream(void* handle, int device) : handle_(handle), device_(device) {}
  void* handle_ = nullptr;
  int device_ = 0;
  friend struct StreamAccess;
};

// Makes `stream` the current stream of its device for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A CUDA event: a marker in a stream to wait on or to time between.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;

  void record(const Stream& stream = Stream::current());
  void wait(const Stream& stream = Stream::current()) const;  // stream waits for this event
  void synchronize() const;                                   // the host waits
  bool query() const;
  float elapsed_ms(const Event& end) const;  // both recorded with enable_timing

 private:
  void* handle_ = nullptr;  // cudaEvent_t
  bool timing_ = false;
  int device_ = -1;  // the device handle_ was made on (record() remakes it for another)
};

}  // namespace loom::cuda
