#include "optim/sgd.h"

#include "autograd/functions/fused_updates.h"
#include "autograd/grad_mode.h"

namespace loom::optim {

SGD::SGD(std::vector<Tensor> params, const SGDOptions& o) : Optimizer(std::move(params), o.lr_, "SGD"), options(o) {
  LOOM_CHECK(o.momentum_ >= 0, ValueError, "SGD: invalid momentum ", o.momentum_);
  LOOM_CHECK(o.weight_decay_ >= 0, ValueError, "SGD: invalid weight_decay ", o.weight_decay_);
  LOOM_CHECK(!o.nesterov_ || (o.momentum_ > 0 && o.dampening_ == 0), ValueError,
             "SGD: nesterov momentum needs momentum > 0 and dampening = 0");
  capturable_ = o.capturable_;
}

std::vector<Optimizer::StateBuffer> SGD::state_buffers() const { return {{"momentum_buffer", false}}; }

void SGD::step() {
  NoGradGuard no_grad;
  ++step_count_;
  // The buffer exists only with momentum; it starts as a copy of the first gradient: the
  // parameters whose buffer is new take an update of their own (variant 1).
  fused_step<1>(
      /*counts_steps=*/false,
      [&](size_t i, const Tensor& p) {
        if (options.momentum_ == 0) return ParamStates<1>{};
        const bool first = !has_state(i, "momentum_buffer");
        return ParamStates<1>{{state(i, "momentum_buffer", p)}, first ? 1 : 0};
      },
      [&](const fused::ParamList<1>& list, const fused::UpdateScalars& scalars, int variant) {
        const fused::SgdHyper hyper{options.momentum_, options.dampening_, options.weight_decay_, options.nesterov_,
                                      /*first_step=*/variant == 1};
        fused::sgd_update("SGD", list, hyper, scalars);
      });
}

}  // namespace loom::optim
