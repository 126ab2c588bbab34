// The optimizers', the gradient scaler's and gradient clipping's multi-tensor ops, as
// PyTorch's torch._fused_adam_, _amp_foreach_non_finite_check_and_unscale_ and
// _foreach_norm: ops that read or update parameters, optimizer state and grads in place,
// without autograd, one launch per dtype list on a GPU (kernels/kernels.h, Note [kernel routing] in kernels/backend.h). optim/ calls
// them by these names, so it needs nothing of the kernel layer.
#pragma once

#include "kernels/kernels.h"

namespace loom::fused {

using kernels::ParamList;     // the tensors of one update, as lists of equal length
using kernels::UpdateScalars; // the step's learning rate and counts, on the host or the device
using kernels::AdamHyper;
using kernels::RmspropHyper;
using kernels::SgdHyper;

using kernels::adam_update;
using kernels::multi_tensor_norm;
using kernels::rmsprop_update;
using kernels::sgd_update;
using kernels::unscale_grads;
using kernels::update_scale;

}  // namespace loom::fused
