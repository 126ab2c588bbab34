// The fused per-parameter update loop: one pass over a parameter, its gradient and its
// state tensors, calling an update functor (optim/update_math.h) per element in opmath.
// On the CPU a parallel loop here; for a CUDA parameter one kernel of
// kernels/cuda/optim_update.cu. Both run update_element, so they do the same per element.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "kernels/cpu/loops.h"

#ifdef LOOM_WITH_CUDA
#include "kernels/cuda/optim_update.h"
#endif

namespace loom::optim {

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

// What both update loops rely on (the gradient is checked by Optimizer::check_param):
// `what` contiguous, on p's device, of p's dtype and size. A state tensor left on another
// device (an optimizer made before the model moved) would otherwise be read through a
// pointer the loop cannot use.
inline void check_update_operand(const char* op, const Tensor& p, const Tensor& t, const char* what) {
  LOOM_CHECK(t.device() == p.device(), DeviceError, op, ": ", what, " on ", t.device(), " but the parameter on ",
             p.device());
  LOOM_CHECK(t.dtype() == p.dtype() && t.sizes() == p.sizes(), ValueError, op, ": ", what, " ",
             shape_str(t.sizes()), " ", dtype_name(t.dtype()), " does not match its parameter ", shape_str(p.sizes()),
             " ", dtype_name(p.dtype()));
  LOOM_CHECK(t.is_contiguous(), ValueError, op, ": the update needs a contiguous ", what);
}

// make_math.template operator()<M>() returns the functor for opmath type M; it is called
// as math(p, g, state_0, ..., state_{K-1}) with M& for p and the states. An undefined
// state tensor (a buffer the options switch off, e.g. amsgrad's max without amsgrad)
// reaches the functor as a scratch value that starts at 0 and is dropped.
template <size_t K, typename MakeMath>
void fused_update(const char* op, const Tensor& p, const std::array<Tensor, K>& states, MakeMath&& make_math) {
  const Tensor& g = p.grad();
#ifdef LOOM_WITH_CUDA
  if (p.is_cuda()) {
    // The math in double; the kernel narrows it to the opmath type (overloads pick the optimizer).
    kernels::cuda::fused_update(op, p, g, states, make_math.template operator()<double>());
    p.bump_version();
    return;
  }
#endif
  LOOM_CHECK(kernels::cpu::host_accessible(p), DeviceError, op, ": parameter on ", p.device(),
             " has no update kernel in this build (Loom was built without CUDA kernels for it)");
  for (const Tensor& s : states)
    if (s.defined()) check_update_operand(op, p, s, "state tensor");
  dispatch_floating(p.dtype(), op, [&]<typename T>() {
    using M = opmath_t<T>;
    const auto math = make_math.template operator()<M>();
    T* pp = static_cast<T*>(p.data());
    const T* gp = static_cast<const T*>(g.data());
    std::array<T*, K> sp;
    for (size_t k = 0; k < K; ++k) sp[k] = states[k].defined() ? static_cast<T*>(states[k].data()) : nullptr;
    parallel_for(0, p.numel(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) update_element<T, K>(math, i, pp, gp, sp.data());
    });
  });
  p.bump_version();
}

}  // namespace loom::optim
