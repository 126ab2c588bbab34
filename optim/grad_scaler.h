// Gradient scaling for float16 training, as torch.amp.GradScaler:
//
//   amp::GradScaler scaler;                          scaler = torch.amp.GradScaler()
//   {                                                with torch.autocast("cuda"):
//     amp::AutocastGuard amp(kCUDA);                     loss = loss_fn(model(x), y)
//     loss = loss_fn(model->forward(x), y);
//   }
//   scaler.scale(loss).backward();                   scaler.scale(loss).backward()
//   scaler.unscale_(opt);                            scaler.unscale_(opt)
//   optim::clip_grad_norm_(params, 1.0);             clip_grad_norm_(params, 1.0)
//   scaler.step(opt);                                scaler.step(opt)
//   scaler.update();                                 scaler.update()
//
// Note [gradient scaling]
// Small float16 gradients underflow to zero. The loss is multiplied by a large scale before
// backward, so every gradient is scaled too, and divided by it again (unscale_) before the
// optimizer reads them. A scale too large makes some gradient inf or NaN: then step() skips
// the optimizer's step (parameters and optimizer state untouched) and update() halves the
// scale (backoff_factor); after growth_interval good steps in a row it doubles it
// (growth_factor). unscale_ is one pass over the gradients that unscales and flags non-finite
// values (fused::unscale_grads: on CUDA one launch per dtype); on CUDA the scale and its
// growth tracker stay on the GPU and update() does not wait for it. step() does, as PyTorch's,
// to decide whether to step — unless the optimizer is capturable: then the update's kernels
// read the flag and the whole unscale / step / update waits for nothing.
// With gradient accumulation, scale each micro-batch's loss and call unscale_/step/update
// once per optimizer step.
#pragma once

#include <optional>
#include <unordered_map>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace loom::amp {

// PyTorch's options and defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() returns the loss, step() just steps
};

class GradScaler {
 public:
  // Throws ValueError for an option out of range (init_scale > 0, growth_factor > 1,
  // backoff_factor in (0, 1), growth_interval >= 1).
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (float32; the scale lives on the device of the first loss it scales).
  Tensor scale(const Tensor& loss);
  // Divides the optimizer's gradients by the scale in place, once per step, and notes
  // whether any is inf or NaN. float16 gradients are a DTypeError (as PyTorch: keep float32
  // master weights). Throws ValueError when called twice before update(), or after step().
  void unscale_(optim::Optimizer& optimizer);
  // The optimizer's step unless a gradient was not finite (unscaling first if unscale_ was
  // not called); returns whether it stepped. That decision waits for the GPU, as PyTorch's
  // does, except with a capturable optimizer (Note [capturable optimizers]): the device
  // then skips the step itself, nothing waits, and step() returns true (queued).
  bool step(optim::Optimizer& optimizer);
  // The scale for the next iteration (Note [gradient scaling]), or new_scale if given.
  // Throws ValueError when no step() or unscale_() recorded an inf check since the last one.
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const;  // 1.0 when disabled; waits for the GPU on CUDA
  int64_t get_growth_tracker() const;
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  // "scale", "growth_factor", "backoff_factor" (float64), "growth_interval",
  // "_growth_tracker" (int64): PyTorch's keys; empty when disabled.
  optim::StateDict state_dict() const;
  // Checks the whole state first (hostile input: ValueError naming the key) and then
  // changes it; a no-op when disabled, as PyTorch.
  void load_state_dict(const optim::StateDict& state);
  // load_state_dict in two halves, for a loader that restores several objects all or
  // nothing (optim/checkpoint.cpp): the check changes nothing, the apply cannot fail.
  struct LoadedState {
    GradScalerOptions options;
    int64_t growth_tracker = 0;
  };
  LoadedState check_state_dict(const optim::StateDict& state) const;
  void apply_state_dict(const LoadedState& loaded) noexcept;

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    Tensor found_inf;  // (1,) float32 on the scale's device: 1 when a gradient was not finite
  };

  void lazy_init(Device device);

  GradScalerOptions options_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_;           // (1,) float32, made by the first scale()
  Tensor growth_tracker_;  // (1,) int32: good steps in a row
  std::unordered_map<const optim::Optimizer*, OptimizerState> per_optimizer_;
};

}  // namespace loom::amp
