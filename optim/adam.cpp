#include "optim/adam.h"

#include "autograd/functions/fused_updates.h"
#include "autograd/grad_mode.h"

namespace loom::optim {

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o, bool decoupled, const char* name)
    : Optimizer(std::move(params), o.lr_, name), options(o), decoupled_(decoupled) {
  options.weight_decay_ = o.weight_decay_.value_or(decoupled ? 1e-2 : 0.0);
  LOOM_CHECK(o.eps_ >= 0, ValueError, name, ": invalid eps ", o.eps_);
  LOOM_CHECK(o.beta1_ >= 0 && o.beta1_ < 1 && o.beta2_ >= 0 && o.beta2_ < 1, ValueError, name,
             ": betas must be in [0, 1), got (", o.beta1_, ", ", o.beta2_, ")");
  LOOM_CHECK(*options.weight_decay_ >= 0, ValueError, name, ": invalid weight_decay ", *options.weight_decay_);
  capturable_ = o.capturable_;
}

std::vector<Optimizer::StateBuffer> Adam::state_buffers() const {
  return {{"exp_avg", false}, {"exp_avg_sq", true}, {"max_exp_avg_sq", true}};
}

void Adam::step() {
  NoGradGuard no_grad;
  ++step_count_;
  const fused::AdamHyper hyper{options.beta1_, options.beta2_, options.eps_, options.weight_decay_.value_or(0.0),
                                 decoupled_, options.amsgrad_};
  // Bias corrections use the parameter's own count of updates (as PyTorch's state["step"]).
  fused_step<3>(
      /*counts_steps=*/true,
      [&](size_t i, const Tensor& p) {
        return ParamStates<3>{{state(i, "exp_avg", p), state(i, "exp_avg_sq", p),
                               options.amsgrad_ ? state(i, "max_exp_avg_sq", p) : Tensor()}};
      },
      [&](const fused::ParamList<3>& list, const fused::UpdateScalars& scalars, int) {
        fused::adam_update(name(), list, hyper, scalars);
      });
}

}  // namespace loom::optim
