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
  // The loop below reads every operand on the host: a gradient or state left on a GPU (say,
  // the model moved back to the CPU after steps there) must be an error, not a wild read.
  LOOM_CHECK(g.device() == p.device(), DeviceError, op, ": parameter on ", p.device(), " but its gradient on ",
             g.device());
  for (size_t k = 0; k < K; ++k) {
    const Tensor& s = states[k];
    if (!s.defined()) continue;
    LOOM_CHECK(s.device() == p.device(), DeviceError, op, ": parameter on ", p.device(), " but state ", k, " on ",
               s.device(), " (create the optimizer after moving the model)");
    LOOM_CHECK(s.dtype() == p.dtype() && s.sizes() == p.sizes() && s.is_contiguous(), ValueError, op, ": state ", k,
               " (", dtype_name(s.dtype()), " ", shape_str(s.sizes()), ") does not match its parameter (",
               dtype_name(p.dtype()), " ", shape_str(p.sizes()), ")");
  }
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
