// optim::SGD, as torch.optim.SGD.
#pragma once

#include "optim/optimizer.h"

namespace loom::optim {

struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& momentum(double m) { momentum_ = m; return *this; }
  SGDOptions& dampening(double d) { dampening_ = d; return *this; }
  SGDOptions& weight_decay(double w) { weight_decay_ = w; return *this; }
  SGDOptions& nesterov(bool n) { nesterov_ = n; return *this; }
  // Learning rate and step counts on the parameters' device (Note [capturable optimizers]).
  SGDOptions& capturable(bool c) { capturable_ = c; return *this; }
  double lr_, momentum_ = 0, dampening_ = 0, weight_decay_ = 0;
  bool nesterov_ = false, capturable_ = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  SGD(std::vector<Tensor> params, double lr) : SGD(std::move(params), SGDOptions(lr)) {}
  void step() override;
  SGDOptions options;

 protected:
  std::vector<StateBuffer> state_buffers() const override;
};

}  // namespace loom::optim
