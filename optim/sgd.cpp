#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "kernels/kernels.h"

namespace loom::optim {

SGD::SGD(std::vector<Tensor> params, const SGDOptions& o) : Optimizer(std::move(params), o.lr_, "SGD"), options(o) {
  LOOM_CHECK(o.momentum_ >= 0, ValueError, "SGD: invalid momentum ", o.momentum_);
  LOOM_CHECK(o.weight_decay_ >= 0, ValueError, "SGD: invalid weight_decay ", o.weight_decay_);
  LOOM_CHECK(!o.nesterov_ || (o.momentum_ > 0 && o.dampening_ == 0), ValueError,
             "SGD: nesterov momentum needs momentum > 0 and dampening = 0");
}

std::vector<Optimizer::StateBuffer> SGD::state_buffers() const { return {{"momentum_buffer", false}}; }

void SGD::step() {
  const profiler::ScopedEvent event = step_event();
  NoGradGuard no_grad;
  ++step_count_;
  for_each_param([&](size_t i, Tensor& p, ParamGroup& group) {
    check_param(p);
    // The buffer exists only with momentum; it starts as a copy of the first gradient.
    const bool first = !has_state(i, "momentum_buffer");
    Tensor buf = options.momentum_ != 0 ? state(i, "momentum_buffer", p) : Tensor();
    kernels::sgd_update("SGD", p, p.grad(), {buf},
                        kernels::SgdMath<double>{group.lr, options.momentum_, options.dampening_,
                                                 options.weight_decay_, options.nesterov_, first});
    p.bump_version();
  });
}

}  // namespace loom::optim
