#include "optim/adam.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "optim/fused_update.h"
#include "optim/update_math.h"

namespace loom::optim {

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o, bool decoupled, const char* name)
    : Optimizer(std::move(params), o.lr_, name), options(o), decoupled_(decoupled) {
  LOOM_CHECK(o.eps_ >= 0, ValueError, name, ": invalid eps ", o.eps_);
  LOOM_CHECK(o.beta1_ >= 0 && o.beta1_ < 1 && o.beta2_ >= 0 && o.beta2_ < 1, ValueError, name,
             ": betas must be in [0, 1), got (", o.beta1_, ", ", o.beta2_, ")");
  LOOM_CHECK(o.weight_decay_ >= 0, ValueError, name, ": invalid weight_decay ", o.weight_decay_);
}

void Adam::step() {
  NoGradGuard no_grad;
  ++step_count_;
  const double bc1 = 1 - std::pow(options.beta1_, double(step_count_));
  const double bc2 = 1 - std::pow(options.beta2_, double(step_count_));
  for_each_param([&](size_t i, Tensor& p, ParamGroup& group) {
    check_param(p);
    Tensor m = state(i, "exp_avg", p);
    Tensor v = state(i, "exp_avg_sq", p);
    auto make = [&]<typename M>() {
      return AdamMath<M>{M(group.lr), M(options.beta1_), M(options.beta2_), M(options.eps_),
                         M(options.weight_decay_), M(bc1), M(bc2), decoupled_, options.amsgrad_};
    };
    if (options.amsgrad_) {
      fused_update<3>(name(), p, {m, v, state(i, "max_exp_avg_sq", p)}, make);
    } else {
      // No max buffer without amsgrad: the functor gets a scratch value it never reads.
      fused_update<2>(name(), p, {m, v}, [&]<typename M>() {
        auto math = make.template operator()<M>();
        return [math](M& pv, M g, M& mv, M& vv) {
          M unused = 0;
          math(pv, g, mv, vv, unused);
        };
      });
    }
  });
}

}  // namespace loom::optim
