// Range checks that a GPU runs without the host waiting for them, and the messages every
// device's range checks share.
//
// Note [deferred device checks]
// On the CPU, index_select, gather, scatter_add, index_add, embedding, one_hot and the
// class-index losses check their indices before they use them and throw at once. On a GPU
// the indices live in device memory: checking them on the host costs a copy and a wait
// for the GPU (a host sync) per op, which left a training step launch-bound. So the CUDA
// backend checks them in a kernel queued before the op, and a failure is written down
// rather than thrown: the first failing check's site (which op, its shape and bound,
// DeviceCheckSite) with the first bad element in row-major order and its value, a
// DeviceCheckRecord in host memory the GPU writes into. The next call that waits for the
// GPU anyway — Tensor::item(), a copy to the host, cuda::synchronize(), a stream's or an
// event's synchronize() — reads the record and throws the IndexError the CPU would have
// thrown (the same message, plus where the check ran and what reported it), once: the
// record is cleared, and the process goes on working, unlike PyTorch's device-side
// asserts. The op itself treats a bad index as harmless (a gather reads zero, a scatter
// skips it), so nothing outside a tensor is touched meanwhile.
//
// What is decided on the host lives here, so that it is tested without a GPU: the sites,
// the messages, and the mailbox that raises a record once and re-arms the device
// (DeviceCheckMailbox, which the CUDA backend gives the record it maps, and a test a fake
// one). The kernel side is kernels/cuda/device_check.cuh.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "core/device.h"
#include "core/half.h"  // LOOM_HOST_DEVICE

namespace loom::kernels {

// What a check verifies; it decides how a failure reads.
enum class DeviceCheckKind : uint32_t {
  kNone = 0,         // nothing failed (an empty record)
  kIndexRange = 1,   // an index in [0, bound): the indexing ops
  kClassTarget = 2,  // a class index in [0, bound), ignore_index exempt: cross_entropy, nll_loss
  kSequenceLength = 3,  // a sequence length in [low, bound) = [1, T]: the recurrent layers' lengths
};

inline constexpr size_t kDeviceCheckTextBytes = 96;  // with the terminating NUL

// One check as the host launches it: passed to the kernel by value.
struct DeviceCheckSite {
  DeviceCheckKind kind = DeviceCheckKind::kNone;
  uint32_t launch = 0;  // nonzero, per launch: the first failing launch keeps the record
  int64_t low = 0;      // valid values are [low, bound)
  int64_t bound = 0;
  char op[kDeviceCheckTextBytes] = {};       // the op as the CPU message names it
  char context[kDeviceCheckTextBytes] = {};  // kClassTarget: "input (6, 5) (ignore_index -100)"
};

// What a failed check leaves for the host: the site of the first failing launch, the
// first bad element (row-major over the checked tensor) of that launch and its value.
struct DeviceCheckRecord {
  DeviceCheckSite site;  // site.kind == kNone: nothing to report
  int64_t position = 0;
  int64_t value = 0;
};

// The device's side, written for host and device so that the host tests it too
// (kernels/cuda/device_check.cuh calls both under its claim's lock):
// - a failing block of launch `launch` takes the record if no launch holds it (holder 0),
//   or if its own launch holds it at a later element;
LOOM_HOST_DEVICE inline bool takes_record(uint32_t holder, int64_t held_position, uint32_t launch,
                                          int64_t position) {
  return holder == 0 || (holder == launch && position < held_position);
}
// - and writes it field by field, the kind last, with `publish()` (a fence that makes the
//   writes visible to the host) before and after the kind, so the host never reads a kind
//   without its fields.
template <typename Publish>
LOOM_HOST_DEVICE void write_record(volatile DeviceCheckRecord* record, const DeviceCheckSite& site, int64_t position,
                                   int64_t value, Publish publish) {
  record->position = position;
  record->value = value;
  record->site.launch = site.launch;
  record->site.low = site.low;
  record->site.bound = site.bound;
  for (size_t i = 0; i < kDeviceCheckTextBytes; ++i) {
    record->site.op[i] = site.op[i];
    record->site.context[i] = site.context[i];
  }
  publish();
  record->site.kind = site.kind;
  publish();
}

// A site with `op` and `context` copied in; text longer than the record holds is cut and
// ends in "...". launch stays 0 (the backend stamps it). Valid values: [0, bound), and
// [1, bound) for kSequenceLength.
DeviceCheckSite make_device_check_site(DeviceCheckKind kind, int64_t bound, std::string_view op,
                                       std::string_view context = {});

// The IndexError messages, one per kind, for every device: the CPU throws them at once,
// a GPU's record is described with them.
//   "gather (dim 1 of shape (4, 5)): index 7 is out of range: expected an index in [0, 5) for a dim of size 5"
std::string index_out_of_range_message(std::string_view op, int64_t value, int64_t bound);
//   "cross_entropy: target class 5 is out of range for 5 classes of input (6, 5) (ignore_index -100)"
std::string class_out_of_range_message(std::string_view op, int64_t value, int64_t classes,
                                       std::string_view context);

//   "LSTM: length 0 of sequence 2 is outside [1, 7] for an input of shape (5, 7, 8)"
std::string sequence_length_message(std::string_view op, int64_t value, int64_t sequence, int64_t steps,
                                    std::string_view context);

// The message of a failed record: its kind's message, then where the check ran and which
// synchronizing call (`where`) reported it.
std::string describe_device_check(const DeviceCheckRecord& record, Device device, std::string_view where);

// The host side of one device's record (Note [deferred device checks]). The record is
// memory the device writes; `rearm` queues whatever lets the device record a failure
// again (the CUDA backend clears its claim on the device). Thread-safe.
class DeviceCheckMailbox {
 public:
  DeviceCheckMailbox(DeviceCheckRecord* record, Device device, std::function<void()> rearm);

  // A copy of `site` stamped with a fresh nonzero launch id.
  DeviceCheckSite stamp(DeviceCheckSite site);
  // After the host has waited for the device: if a check failed, clears the record,
  // re-arms the device and throws its error (described with `where`): the IndexError the
  // CPU throws, or its ValueError for a sequence length; else nothing.
  // A failure is thrown once.
  void raise_pending(std::string_view where);

 private:
  DeviceCheckRecord* record_;
  Device device_;
  std::function<void()> rearm_;
  std::mutex mutex_;
  std::atomic<uint32_t> next_launch_{0};
};

}  // namespace loom::kernels
