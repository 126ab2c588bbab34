#include "optim/rmsprop.h"

#include "autograd/grad_mode.h"
#include "optim/fused_update.h"
#include "optim/update_math.h"

namespace loom::optim {

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& o)
    : Optimizer(std::move(params), o.lr_, "RMSprop"), options(o) {
  LOOM_CHECK(o.alpha_ >= 0, ValueError, "RMSprop: invalid alpha ", o.alpha_);
  LOOM_CHECK(o.eps_ >= 0, ValueError, "RMSprop: invalid eps ", o.eps_);
  LOOM_CHECK(o.momentum_ >= 0, ValueError, "RMSprop: invalid momentum ", o.momentum_);
  LOOM_CHECK(o.weight_decay_ >= 0, ValueError, "RMSprop: invalid weight_decay ", o.weight_decay_);
}

void RMSprop::step() {
  NoGradGuard no_grad;
  ++step_count_;
  for_each_param([&](size_t i, Tensor& p, ParamGroup& group) {
    check_param(p);
    Tensor square_avg = state(i, "square_avg", p);
    Tensor grad_avg = options.centered_ ? state(i, "grad_avg", p) : Tensor();
    Tensor buf = options.momentum_ > 0 ? state(i, "momentum_buffer", p) : Tensor();
    fused_update<3>("RMSprop", p, {square_avg, grad_avg, buf}, [&]<typename M>() {
      return RmspropMath<M>{M(group.lr), M(options.alpha_), M(options.eps_), M(options.weight_decay_),
                            M(options.momentum_), options.centered_};
    });
  });
}

}  // namespace loom::optim
