// --amp for the examples: mixed precision as a PyTorch script turns it on,
// torch.autocast around forward and loss, and a GradScaler for float16.
//
//   examples::AmpOption amp;  amp.add_to(app);
//   amp::GradScaler scaler({.enabled = amp.needs_scaler()});
//   { amp::AutocastGuard autocast = amp.guard(device); logits = model(x); loss = ...; }
//   scaler.scale(loss).backward(); examples::scaled_step(scaler, optimizer, model->parameters(), 1.0);
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom.h"

namespace examples {

struct AmpOption {
  std::string name = "off";  // off, bf16 or fp16

  void add_to(CLI::App& app) {
    app.add_option("--amp", name, "mixed precision: off, bf16 or fp16 (fp16 adds a GradScaler)")
        ->check(CLI::IsMember({"off", "bf16", "fp16"}));
  }
  std::optional<loom::DType> dtype() const {
    if (name == "bf16") return loom::kBFloat16;
    if (name == "fp16") return loom::kFloat16;
    return std::nullopt;
  }
  bool needs_scaler() const { return name == "fp16"; }
  // The autocast region for one forward and loss (a disabled guard when --amp off).
  std::unique_ptr<loom::amp::AutocastGuard> guard(loom::Device device) const {
    return std::make_unique<loom::amp::AutocastGuard>(device, dtype(), /*enabled=*/dtype().has_value());
  }
};

// The optimizer step that ends a group of micro-batches: with max_norm > 0 the gradients
// are unscaled first, so that clipping sees the true ones, and clipped; then the scaler
// steps (skipping a step whose gradients hold inf or NaN) and updates its scale.
inline void scaled_step(loom::amp::GradScaler& scaler, loom::optim::Optimizer& optimizer,
                        const std::vector<loom::Tensor>& parameters, double max_norm) {
  if (max_norm > 0) {
    scaler.unscale_(optimizer);
    loom::optim::clip_grad_norm_(parameters, max_norm);
  }
  scaler.step(optimizer);
  scaler.update();
}

}  // namespace examples
