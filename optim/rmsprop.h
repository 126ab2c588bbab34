// optim::RMSprop, as torch.optim.RMSprop.
#pragma once

#include "optim/optimizer.h"

namespace loom::optim {

struct RMSpropOptions {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  RMSpropOptions& alpha(double a) { alpha_ = a; return *this; }
  RMSpropOptions& eps(double e) { eps_ = e; return *this; }
  RMSpropOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
  RMSpropOptions& momentum(double m) { momentum_ = m; return *this; }
  RMSpropOptions& centered(bool c) { centered_ = c; return *this; }
  // Learning rate and step counts on the parameters' device (Note [capturable optimizers]).
  RMSpropOptions& capturable(bool c) { capturable_ = c; return *this; }
  double lr_, alpha_ = 0.99, eps_ = 1e-8, weight_decay_ = 0, momentum_ = 0;
  bool centered_ = false, capturable_ = false;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options);
  RMSprop(std::vector<Tensor> params, double lr) : RMSprop(std::move(params), RMSpropOptions(lr)) {}
  void step() override;
  RMSpropOptions options;

 protected:
  std::vector<StateBuffer> state_buffers() const override;
};

}  // namespace loom::optim
