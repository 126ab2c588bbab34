// The host half of Note [deferred device checks] (kernels/support/device_check.h).
#include "kernels/support/device_check.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace loom::kernels {
namespace {

// `text` into a NUL-terminated field of kDeviceCheckTextBytes, cut with "..." if longer.
void copy_text(char (&field)[kDeviceCheckTextBytes], std::string_view text) {
  constexpr size_t room = kDeviceCheckTextBytes - 1;
  std::string cut(text);
  if (cut.size() > room) cut = cut.substr(0, room - 3) + "...";
  std::memcpy(field, cut.data(), cut.size());
  field[cut.size()] = '\0';
}

// A field written by the device: read up to its NUL, never past its end.
std::string_view text_of(const char (&field)[kDeviceCheckTextBytes]) {
  return std::string_view(field, std::find(field, field + kDeviceCheckTextBytes, '\0') - field);
}

}  // namespace

DeviceCheckSite make_device_check_site(DeviceCheckKind kind, int64_t bound, std::string_view op,
                                       std::string_view context) {
  DeviceCheckSite site;
  site.kind = kind;
  site.low = kind == DeviceCheckKind::kSequenceLength ? 1 : 0;
  site.bound = bound;
  copy_text(site.op, op);
  copy_text(site.context, context);
  return site;
}

std::string index_out_of_range_message(std::string_view op, int64_t value, int64_t bound) {
  return detail::str(op, ": index ", value, " is out of range: expected an index in [0, ", bound,
                     ") for a dim of size ", bound);
}

std::string class_out_of_range_message(std::string_view op, int64_t value, int64_t classes,
                                       std::string_view context) {
  return detail::str(op, ": target class ", value, " is out of range for ", classes, " classes of ", context);
}

std::string sequence_length_message(std::string_view op, int64_t value, int64_t sequence, int64_t steps,
                                    std::string_view context) {
  return detail::str(op, ": length ", value, " of sequence ", sequence, " is outside [1, ", steps, "] for ", context);
}

std::string describe_device_check(const DeviceCheckRecord& record, Device device, std::string_view where) {
  const DeviceCheckSite& site = record.site;
  const std::string_view op = text_of(site.op);
  std::string message;
  switch (site.kind) {
    case DeviceCheckKind::kIndexRange:
      message = index_out_of_range_message(op, record.value, site.bound);
      break;
    case DeviceCheckKind::kClassTarget:
      message = class_out_of_range_message(op, record.value, site.bound, text_of(site.context));
      break;
    case DeviceCheckKind::kSequenceLength:
      message = sequence_length_message(op, record.value, record.position, site.bound - 1, text_of(site.context));
      break;
    default:
      LOOM_ASSERT(false, "describe_device_check: a record of unknown kind ", uint32_t(site.kind));
  }
  return detail::str(message, " (element ", record.position, "; checked on ", device,
                     " without the host waiting, and reported by ", where, ", the next call that waited for it)");
}

DeviceCheckMailbox::DeviceCheckMailbox(DeviceCheckRecord* record, Device device, std::function<void()> rearm)
    : record_(record), device_(device), rearm_(std::move(rearm)) {
  LOOM_ASSERT(record_ != nullptr);
}

DeviceCheckSite DeviceCheckMailbox::stamp(DeviceCheckSite site) {
  uint32_t id = 0;
  while (id == 0) id = next_launch_.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 means "no launch"
  site.launch = id;
  return site;
}

void DeviceCheckMailbox::raise_pending(std::string_view where) {
  DeviceCheckRecord failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::atomic_ref<DeviceCheckKind> kind(record_->site.kind);
    if (kind.load(std::memory_order_acquire) == DeviceCheckKind::kNone) return;
    std::memcpy(static_cast<void*>(&failed), record_, sizeof(failed));
    kind.store(DeviceCheckKind::kNone, std::memory_order_release);
    rearm_();
  }
  const std::string message = describe_device_check(failed, device_, where);
  if (failed.site.kind == DeviceCheckKind::kSequenceLength) throw ValueError(message);
  throw IndexError(message);
}

}  // namespace loom::kernels
