// The per-element math of the optimizers' fused updates (kernels::sgd_update, adam_update,
// rmsprop_update), shared by the CPU loop (kernels/cpu/optim_update.cpp) and the CUDA
// kernel (kernels/cuda/optim_update.cu) as LOOM_HOST_DEVICE code, so that the CPU tests
// cover it. All in opmath (float or double): update_math fills the fields in double from
// the hyper-parameters, the learning rate and the step count, and narrow() converts them to
// the parameter's opmath type on either device.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "core/half.h"

namespace loom::kernels {

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

// What each optimizer's update needs besides its learning rate and step count.
struct SgdHyper {
  double momentum, dampening, weight_decay;
  bool nesterov, first_step;  // first_step: the momentum buffer starts as the gradient
};
struct AdamHyper {
  double beta1, beta2, eps, weight_decay;
  bool decoupled, amsgrad;
};
struct RmspropHyper {
  double alpha, eps, weight_decay, momentum;
  bool centered;
};

// One parameter's update math, in double, from its group's learning rate and its own count
// of updates (this one included). An eager step evaluates it on the host; a capturable one
// where the update runs, from the lr and step tensors there (Note [capturable optimizers] in
// optim/optimizer.h): one formula either way. Adam's bias corrections are computed in double
// as PyTorch computes them in Python; SGD and RMSprop do not use the count.
LOOM_HOST_DEVICE inline SgdMath<double> update_math(const SgdHyper& h, double lr, double /*step*/) {
  return {lr, h.momentum, h.dampening, h.weight_decay, h.nesterov, h.first_step};
}
LOOM_HOST_DEVICE inline AdamMath<double> update_math(const AdamHyper& h, double lr, double step) {
  return {lr,
          h.beta1,
          h.beta2,
          h.eps,
          h.weight_decay,
          lr / (1 - std::pow(h.beta1, step)),   // step_size
          std::sqrt(1 - std::pow(h.beta2, step)),  // bias_correction2_sqrt
          h.decoupled,
          h.amsgrad};
}
LOOM_HOST_DEVICE inline RmspropMath<double> update_math(const RmspropHyper& h, double lr, double /*step*/) {
  return {lr, h.alpha, h.eps, h.weight_decay, h.momentum, h.centered};
}

// The math in opmath M, each field narrowed from double (as M(double) does): on the host for
// an eager step, on the device for a capturable one.
template <typename M>
LOOM_HOST_DEVICE SgdMath<M> narrow(const SgdMath<double>& d) {
  return {M(d.lr), M(d.momentum), M(d.dampening), M(d.weight_decay), d.nesterov, d.first_step};
}
template <typename M>
LOOM_HOST_DEVICE AdamMath<M> narrow(const AdamMath<double>& d) {
  return {M(d.lr), M(d.beta1), M(d.beta2), M(d.eps), M(d.weight_decay),
          M(d.step_size), M(d.bias_correction2_sqrt), d.decoupled, d.amsgrad};
}
template <typename M>
LOOM_HOST_DEVICE RmspropMath<M> narrow(const RmspropMath<double>& d) {
  return {M(d.lr), M(d.alpha), M(d.eps), M(d.weight_decay), M(d.momentum), d.centered};
}

// Element i of one update: p[i], g[i] and the K states[k][i] in opmath M, then
// math(p, g, state_0, ..., state_{K-1}) and the results stored back. A null state pointer
// (an undefined state tensor) becomes a scratch value that starts at 0 and is dropped.
template <typename T, size_t K, typename Math, size_t... I>
LOOM_HOST_DEVICE inline void update_element_impl(const Math& math, int64_t i, T* p, const T* g, T* const* states,
                                                 std::index_sequence<I...>) {
  using M = opmath_t<T>;
  M pv = M(p[i]);
  M sv[K] = {(states[I] ? M(states[I][i]) : M(0))...};
  math(pv, M(g[i]), sv[I]...);
  p[i] = T(pv);
  ((states[I] ? void(states[I][i] = T(sv[I])) : void()), ...);
}

template <typename T, size_t K, typename Math>
LOOM_HOST_DEVICE inline void update_element(const Math& math, int64_t i, T* p, const T* g, T* const* states) {
  update_element_impl<T, K>(math, i, p, g, states, std::make_index_sequence<K>{});
}

}  // namespace loom::kernels
