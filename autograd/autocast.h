// Autocast: regions of code where ops run in the precision PyTorch's torch.autocast gives
// them (matmuls in bfloat16 or float16, losses in float32, ...), as
//
//   with torch.autocast("cpu", dtype=torch.bfloat16):      loom::amp::AutocastGuard amp(loom::kCPU);
//       logits = model(x)                                   Tensor logits = model->forward(x);
//       loss = F.cross_entropy(logits, y)                   Tensor loss = nn::functional::cross_entropy(logits, y);
//
// Note [autocast]
// The state is per thread and per device type (CPU, CUDA): enabled or not, and the lower
// precision dtype (bfloat16 by default on the CPU, float16 on CUDA). An op reads the state
// of its inputs' device and casts them as its policy says (Note [autocast policy],
// kernels/support/autocast_policy.h); the cast is an ordinary differentiable .to(dtype), so the
// backward runs each op in the dtypes its forward used and a float32 parameter's gradient
// arrives in float32. Only float32 and 16-bit inputs are cast: float64 stays as it is.
// Within the outermost region, a float32 leaf that requires grad (a parameter) is
// cast to the lower precision once and the copy reused (a Linear's weight read by every
// step of a sequence is not cast per step); the cache empties when that region ends, so an
// optimizer step between two regions is seen by the next one. The backward pass runs with
// autocast off (the engine suspends it), as in PyTorch.
#pragma once

#include <optional>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/support/autocast_policy.h"

namespace loom::amp {

// As `with torch.autocast(device_type, dtype, enabled, cache_enabled):` on this thread.
// Nestable: an inner guard may change the dtype, or turn autocast off (enabled = false);
// the outer state comes back when it ends. dtype must be float16 or bfloat16 (default:
// bfloat16 on the CPU, float16 on CUDA).
class AutocastGuard {
 public:
  explicit AutocastGuard(Device device, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                         bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

bool is_autocast_enabled(Device device);
// The lower precision dtype autocast uses on the device (also while it is off).
DType get_autocast_dtype(Device device);
// Drops this thread's cached casts of parameters (the outermost region's end does it).
void clear_autocast_cache();
// How many parameter casts this thread holds (for tests and debugging).
size_t autocast_cache_size();

}  // namespace loom::amp

namespace loom::autocast {

// The inputs of `op` cast as its policy asks on their device (the first defined input's),
// when autocast is enabled there; otherwise (and for integer or float64 inputs, and
// undefined ones) unchanged. For ops with a row in kernels::kAutocastOps.
std::vector<Tensor> cast_inputs(const char* op, std::vector<Tensor> inputs);
// One input cast by the given policy (the op-table rows of the elementwise ops).
Tensor cast_input(const Tensor& x, kernels::AutocastPolicy policy);
// A recurrent layer's or cell's data (x, h, c: the first `data` entries) and weights as
// autocast has them run: cast by the op's policy; under a policy that keeps the inputs'
// dtype, x and the state promoted to one dtype and, when that is autocast's 16-bit dtype,
// the weights cast to it (through the parameter cache), as PyTorch's CPU GRU and cells do.
std::vector<Tensor> cast_recurrent_inputs(const char* op, std::vector<Tensor> inputs, size_t data);

// While alive, autocast is off on this thread whatever the guards say: the engine holds
// one over a backward pass.
class SuspendGuard {
 public:
  SuspendGuard();
  ~SuspendGuard();
  SuspendGuard(const SuspendGuard&) = delete;
  SuspendGuard& operator=(const SuspendGuard&) = delete;
};

// This thread's autocast state as ops see it now (off while suspended), to run code later
// as it ran now: loom::checkpoint recomputes a segment under its forward's state, inside a
// backward that suspends autocast.
struct Snapshot {
  bool cpu_enabled = false, cuda_enabled = false;
  DType cpu_dtype = kBFloat16, cuda_dtype = kFloat16;
};
Snapshot snapshot();

// While alive, autocast is as `s` says on this thread (a suspension lifted), casting
// parameters without the cache (the recomputation's casts are its own); then as before.
class RestoreGuard {
 public:
  explicit RestoreGuard(const Snapshot& s);
  ~RestoreGuard();
  RestoreGuard(const RestoreGuard&) = delete;
  RestoreGuard& operator=(const RestoreGuard&) = delete;

 private:
  Snapshot previous_;
  bool previous_cache_enabled_;
  int previous_suspended_;
};

}  // namespace loom::autocast
