// optim::Adam and optim::AdamW, as torch.optim.Adam / AdamW.
#pragma once

#include <optional>

#include "optim/optimizer.h"

namespace loom::optim {

struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& betas(double b1, double b2) { beta1_ = b1; beta2_ = b2; return *this; }
  AdamOptions& eps(double e) { eps_ = e; return *this; }
  AdamOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
  AdamOptions& amsgrad(bool a) { amsgrad_ = a; return *this; }
  // Learning rate and step counts on the parameters' device (Note [capturable optimizers]).
  AdamOptions& capturable(bool c) { capturable_ = c; return *this; }
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
  // Unset means PyTorch's default: 0 for Adam, 1e-2 for AdamW (the optimizer fills it in).
  std::optional<double> weight_decay_;
  bool amsgrad_ = false, capturable_ = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options) : Adam(std::move(params), options, false, "Adam") {}
  Adam(std::vector<Tensor> params, double lr) : Adam(std::move(params), AdamOptions(lr)) {}
  void step() override;
  AdamOptions options;

 protected:
  std::vector<StateBuffer> state_buffers() const override;
  Adam(std::vector<Tensor> params, const AdamOptions& options, bool decoupled, const char* name);

 private:
  bool decoupled_;
};

// Adam with decoupled weight decay (default weight_decay 0.01, as PyTorch).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamOptions& options) : Adam(std::move(params), options, true, "AdamW") {}
  AdamW(std::vector<Tensor> params, double lr) : AdamW(std::move(params), AdamOptions(lr)) {}
};

}  // namespace loom::optim
