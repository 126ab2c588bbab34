// The per-element math of the optimizers, shared by the CPU loops and the CUDA kernels
// (LOOM_HOST_DEVICE), so that the CPU tests cover it. All in opmath (float or double).
#pragma once

#include <cmath>

#include "core/half.h"

namespace loom::optim {

// SGD with momentum, dampening, nesterov and (L2) weight decay, as torch.optim.SGD.
template <typename M>
struct SgdMath {
  M lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
  // Updates p (and the momentum buffer buf when momentum != 0).
  LOOM_HOST_DEVICE void operator()(M& p, M g, M& buf) const {
    if (weight_decay != M(0)) g += weight_decay * p;
    if (momentum != M(0)) {
      buf = first_step ? g : momentum * buf + (M(1) - dampening) * g;
      g = nesterov ? g + momentum * buf : buf;
    }
    p -= lr * g;
  }
};

// Adam / AdamW (decoupled weight decay), amsgrad optional, as torch.optim.Adam(W).
// The step's scalars come in precomputed in double (as PyTorch computes them in Python):
// step_size = lr / (1 - beta1^step), bias_correction2_sqrt = sqrt(1 - beta2^step).
template <typename M>
struct AdamMath {
  M lr, beta1, beta2, eps, weight_decay;
  M step_size, bias_correction2_sqrt;
  bool decoupled, amsgrad;
  LOOM_HOST_DEVICE void operator()(M& p, M g, M& m, M& v, M& v_max) const {
    if (weight_decay != M(0)) {
      if (decoupled) p *= M(1) - lr * weight_decay;
      else g += weight_decay * p;
    }
    m = beta1 * m + (M(1) - beta1) * g;
    v = beta2 * v + (M(1) - beta2) * g * g;
    M v_used = v;
    if (amsgrad) {
      v_max = v_max > v ? v_max : v;
      v_used = v_max;
    }
    const M denom = std::sqrt(v_used) / bias_correction2_sqrt + eps;
    p -= step_size * (m / denom);
  }
};

// RMSprop (optionally centered, with momentum), as torch.optim.RMSprop.
template <typename M>
struct RmspropMath {
  M lr, alpha, eps, weight_decay, momentum;
  bool centered;
  LOOM_HOST_DEVICE void operator()(M& p, M g, M& square_avg, M& grad_avg, M& buf) const {
    if (weight_decay != M(0)) g += weight_decay * p;
    square_avg = alpha * square_avg + (M(1) - alpha) * g * g;
    M avg;
    if (centered) {
      grad_avg = alpha * grad_avg + (M(1) - alpha) * g;
      avg = std::sqrt(square_avg - grad_avg * grad_avg) + eps;
    } else {
      avg = std::sqrt(square_avg) + eps;
    }
    if (momentum > M(0)) {
      buf = momentum * buf + g / avg;
      p -= lr * buf;
    } else {
      p -= lr * (g / avg);
    }
  }
};

}  // namespace loom::optim
