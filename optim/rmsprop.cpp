#include "optim/rmsprop.h"

#include "autograd/functions/fused_updates.h"
#include "autograd/grad_mode.h"

namespace loom::optim {

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& o)
    : Optimizer(std::move(params), o.lr_, "RMSprop"), options(o) {
  LOOM_CHECK(o.alpha_ >= 0, ValueError, "RMSprop: invalid alpha ", o.alpha_);
  LOOM_CHECK(o.eps_ >= 0, ValueError, "RMSprop: invalid eps ", o.eps_);
  LOOM_CHECK(o.momentum_ >= 0, ValueError, "RMSprop: invalid momentum ", o.momentum_);
  LOOM_CHECK(o.weight_decay_ >= 0, ValueError, "RMSprop: invalid weight_decay ", o.weight_decay_);
  capturable_ = o.capturable_;
}

std::vector<Optimizer::StateBuffer> RMSprop::state_buffers() const {
  return {{"square_avg", true}, {"grad_avg", false}, {"momentum_buffer", false}};
}

void RMSprop::step() {
  NoGradGuard no_grad;
  ++step_count_;
  const fused::RmspropHyper hyper{options.alpha_, options.eps_, options.weight_decay_, options.momentum_,
                                    options.centered_};
  fused_step<3>(
      /*counts_steps=*/false,
      [&](size_t i, const Tensor& p) {
        return ParamStates<3>{{state(i, "square_avg", p), options.centered_ ? state(i, "grad_avg", p) : Tensor(),
                               options.momentum_ > 0 ? state(i, "momentum_buffer", p) : Tensor()}};
      },
      [&](const fused::ParamList<3>& list, const fused::UpdateScalars& scalars, int) {
        fused::rmsprop_update("RMSprop", list, hyper, scalars);
      });
}

}  // namespace loom::optim
