#include "optim/rmsprop.h"

#include "autograd/grad_mode.h"
#include "kernels/kernels.h"

namespace loom::optim {

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& o)
    : Optimizer(std::move(params), o.lr_, "RMSprop"), options(o) {
  LOOM_CHECK(o.alpha_ >= 0, ValueError, "RMSprop: invalid alpha ", o.alpha_);
  LOOM_CHECK(o.eps_ >= 0, ValueError, "RMSprop: invalid eps ", o.eps_);
  LOOM_CHECK(o.momentum_ >= 0, ValueError, "RMSprop: invalid momentum ", o.momentum_);
  LOOM_CHECK(o.weight_decay_ >= 0, ValueError, "RMSprop: invalid weight_decay ", o.weight_decay_);
}

std::vector<Optimizer::StateBuffer> RMSprop::state_buffers() const {
  return {{"square_avg", true}, {"grad_avg", false}, {"momentum_buffer", false}};
}

void RMSprop::step() {
  const profiler::ScopedEvent event = step_event();
  NoGradGuard no_grad;
  ++step_count_;
  for_each_param([&](size_t i, Tensor& p, ParamGroup& group) {
    check_param(p);
    Tensor square_avg = state(i, "square_avg", p);
    Tensor grad_avg = options.centered_ ? state(i, "grad_avg", p) : Tensor();
    Tensor buf = options.momentum_ > 0 ? state(i, "momentum_buffer", p) : Tensor();
    kernels::rmsprop_update("RMSprop", p, p.grad(), {square_avg, grad_avg, buf},
                            kernels::RmspropMath<double>{group.lr, options.alpha_, options.eps_,
                                                         options.weight_decay_, options.momentum_, options.centered_});
    p.bump_version();
  });
}

}  // namespace loom::optim
