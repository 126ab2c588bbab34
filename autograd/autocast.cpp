// Autocast's per-thread state, its cast and its parameter cache (Note [autocast]).
#include "autograd/autocast.h"

#include <memory>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace loom {
namespace {

struct DeviceAutocast {
  bool enabled = false;
  DType dtype;
};

// A parameter's cast: keyed by its TensorImpl*, and holding a weak reference to it so a
// freed parameter whose address is reused is not mistaken for the old one.
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  Tensor cast;
};

struct AutocastState {
  DeviceAutocast cpu{false, kBFloat16};
  DeviceAutocast cuda{false, kFloat16};
  bool cache_enabled = true;
  int depth = 0;      // guards alive on this thread
  int suspended = 0;  // SuspendGuards alive
  std::unordered_map<const TensorImpl*, CachedCast> cache;

  DeviceAutocast& of(DeviceType d) { return d == DeviceType::CUDA ? cuda : cpu; }
};

thread_local AutocastState state;

bool is_low_precision(DType d) { return d == kFloat16 || d == kBFloat16; }

// A float32 parameter (a leaf that requires grad, not a view) cast to `to`, once per region.
Tensor cast_parameter(const Tensor& x, DType to) {
  const bool cacheable = state.cache_enabled && x.dtype() == kFloat32 && x.requires_grad() && x.is_leaf() &&
                         GradMode::is_enabled();
  if (!cacheable) return x.to(to);
  auto it = state.cache.find(x.impl());
  if (it != state.cache.end() && it->second.source.lock() == x.impl_ptr() && it->second.cast.dtype() == to)
    return it->second.cast;
  Tensor cast = x.to(to);
  state.cache[x.impl()] = CachedCast{x.impl_ptr(), cast};
  return cast;
}

Tensor cast_by(const Tensor& x, kernels::CastPolicy policy, const DeviceAutocast& device) {
  if (!x.defined() || !x.is_floating_point() || x.dtype() == kFloat64) return x;
  switch (policy) {
    case kernels::CastPolicy::LowerPrecision:
      return x.dtype() == device.dtype ? x : cast_parameter(x, device.dtype);
    case kernels::CastPolicy::Float32:
      return is_low_precision(x.dtype()) ? x.to(kFloat32) : x;
    case kernels::CastPolicy::Float16:
      return x.dtype() == kFloat16 ? x : cast_parameter(x, kFloat16);
    case kernels::CastPolicy::Keep:
      return x;
  }
  return x;
}

// The autocast state of x's device, or nullptr when autocast is off there.
const DeviceAutocast* active_for(const Tensor& x) {
  if (state.suspended > 0 || !x.defined()) return nullptr;
  const DeviceType type = x.device().type;
  const DeviceAutocast& d = state.of(type);
  return d.enabled ? &d : nullptr;
}

kernels::CastPolicy on_device(kernels::AutocastPolicy p, DeviceType type) {
  return type == DeviceType::CUDA ? p.cuda : p.cpu;
}

}  // namespace

namespace amp {

AutocastGuard::AutocastGuard(Device device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_(device.type) {
  DeviceAutocast& d = state.of(device_);
  const DType to = dtype.value_or(d.dtype);
  LOOM_CHECK(is_low_precision(to), DTypeError, "autocast: dtype ", dtype_name(to), " on ", device.str(),
             " is not supported; expected float16 or bfloat16");
  prev_enabled_ = d.enabled;
  prev_dtype_ = d.dtype;
  prev_cache_enabled_ = state.cache_enabled;
  d.enabled = enabled;
  d.dtype = to;
  state.cache_enabled = cache_enabled;
  ++state.depth;
}

AutocastGuard::~AutocastGuard() {
  DeviceAutocast& d = state.of(device_);
  if (--state.depth == 0) state.cache.clear();  // the outermost region ends
  d.enabled = prev_enabled_;
  d.dtype = prev_dtype_;
  state.cache_enabled = prev_cache_enabled_;
}

bool is_autocast_enabled(Device device) { return state.of(device.type).enabled; }
DType get_autocast_dtype(Device device) { return state.of(device.type).dtype; }
void clear_autocast_cache() { state.cache.clear(); }
size_t autocast_cache_size() { return state.cache.size(); }

}  // namespace amp

namespace autocast {

std::vector<Tensor> cast_inputs(const char* op, std::vector<Tensor> inputs) {
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs)
    if (t.defined()) {
      first = &t;
      break;
    }
  const DeviceAutocast* device = first ? active_for(*first) : nullptr;
  if (!device) return inputs;
  const kernels::CastPolicy policy = on_device(kernels::autocast_policy(op), first->device().type);
  for (Tensor& t : inputs) t = cast_by(t, policy, *device);
  return inputs;
}

Tensor cast_input(const Tensor& x, kernels::AutocastPolicy policy) {
  const DeviceAutocast* device = active_for(x);
  return device ? cast_by(x, on_device(policy, x.device().type), *device) : x;
}

SuspendGuard::SuspendGuard() { ++state.suspended; }
SuspendGuard::~SuspendGuard() { --state.suspended; }

// Note [autocast]; the policy's rows for the recurrent ops are in kernels/support/autocast_policy.h.
std::vector<Tensor> cast_recurrent_inputs(const char* op, std::vector<Tensor> inputs, size_t data) {
  if (!inputs[0].defined() || !amp::is_autocast_enabled(inputs[0].device())) return inputs;
  std::vector<Tensor> cast = cast_inputs(op, std::move(inputs));
  const Device device = cast[0].device();
  const kernels::AutocastPolicy policy = kernels::autocast_policy(op);
  if ((device.type == DeviceType::CUDA ? policy.cuda : policy.cpu) != kernels::CastPolicy::Keep) return cast;
  DType common = cast[0].dtype();
  for (size_t i = 1; i < data; ++i)
    if (cast[i].defined()) common = promote_types(common, cast[i].dtype());
  if (common != amp::get_autocast_dtype(device)) return cast;
  for (size_t i = 0; i < cast.size(); ++i) {
    if (!cast[i].defined() || !cast[i].is_floating_point() || cast[i].dtype() == kFloat64) continue;
    cast[i] = i < data ? cast[i].to(common) : cast_input(cast[i], kernels::kCastToLower);
  }
  return cast;
}

Snapshot snapshot() {
  const bool on = state.suspended == 0;
  return {on && state.cpu.enabled, on && state.cuda.enabled, state.cpu.dtype, state.cuda.dtype};
}

RestoreGuard::RestoreGuard(const Snapshot& s)
    : previous_{state.cpu.enabled, state.cuda.enabled, state.cpu.dtype, state.cuda.dtype},
      previous_cache_enabled_(state.cache_enabled),
      previous_suspended_(state.suspended) {
  state.cpu = {s.cpu_enabled, s.cpu_dtype};
  state.cuda = {s.cuda_enabled, s.cuda_dtype};
  state.cache_enabled = false;
  state.suspended = 0;
}

RestoreGuard::~RestoreGuard() {
  state.cpu = {previous_.cpu_enabled, previous_.cpu_dtype};
  state.cuda = {previous_.cuda_enabled, previous_.cuda_dtype};
  state.cache_enabled = previous_cache_enabled_;
  state.suspended = previous_suspended_;
}

}  // namespace autocast
}  // namespace loom
