#include "optim/adam.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "kernels/kernels.h"

namespace loom::optim {

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o, bool decoupled, const char* name)
    : Optimizer(std::move(params), o.lr_, name), options(o), decoupled_(decoupled) {
  options.weight_decay_ = o.weight_decay_.value_or(decoupled ? 1e-2 : 0.0);
  LOOM_CHECK(o.eps_ >= 0, ValueError, name, ": invalid eps ", o.eps_);
  LOOM_CHECK(o.beta1_ >= 0 && o.beta1_ < 1 && o.beta2_ >= 0 && o.beta2_ < 1, ValueError, name,
             ": betas must be in [0, 1), got (", o.beta1_, ", ", o.beta2_, ")");
  LOOM_CHECK(*options.weight_decay_ >= 0, ValueError, name, ": invalid weight_decay ", *options.weight_decay_);
}

std::vector<Optimizer::StateBuffer> Adam::state_buffers() const {
  return {{"exp_avg", false}, {"exp_avg_sq", true}, {"max_exp_avg_sq", true}};
}

void Adam::step() {
  const profiler::ScopedEvent event = step_event();
  NoGradGuard no_grad;
  ++step_count_;
  for_each_param([&](size_t i, Tensor& p, ParamGroup& group) {
    check_param(p);
    // Bias corrections use the parameter's own count of updates (as PyTorch's state["step"]).
    const double step = double(advance_step(i));
    const double step_size = group.lr / (1 - std::pow(options.beta1_, step));
    const double bias_correction2_sqrt = std::sqrt(1 - std::pow(options.beta2_, step));
    Tensor m = state(i, "exp_avg", p);
    Tensor v = state(i, "exp_avg_sq", p);
    Tensor v_max = options.amsgrad_ ? state(i, "max_exp_avg_sq", p) : Tensor();
    kernels::adam_update(name(), p, p.grad(), {m, v, v_max},
                         kernels::AdamMath<double>{group.lr, options.beta1_, options.beta2_, options.eps_,
                                                   options.weight_decay_.value_or(0.0), step_size,
                                                   bias_correction2_sqrt, decoupled_, options.amsgrad_});
    p.bump_version();
  });
}

}  // namespace loom::optim
