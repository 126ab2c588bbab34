// The fused per-parameter update loop: one pass over a parameter, its gradient and its
// state tensors, calling an update functor (optim/update_math.h) per element in opmath.
#pragma once

#include <array>
#include <tuple>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace loom::optim {

// make_math.template operator()<M>() returns the functor for opmath type M; it is called
// as math(p, g, state_0, ..., state_{K-1}) with M& for p and the states. An undefined
// state tensor (a buffer the options switch off, e.g. amsgrad's max without amsgrad)
// reaches the functor as a scratch value that starts at 0 and is dropped.
template <size_t K, typename MakeMath>
void fused_update(const char* op, const Tensor& p, const std::array<Tensor, K>& states, MakeMath&& make_math) {
  const Tensor& g = p.grad();
  LOOM_CHECK(p.is_cpu(), DeviceError, op, ": parameter on ", p.device(),
             " has no update kernel in this build (Loom was built without CUDA kernels for it)");
  dispatch_floating(p.dtype(), op, [&]<typename T>() {
    using M = opmath_t<T>;
    const auto math = make_math.template operator()<M>();
    T* pp = static_cast<T*>(p.data());
    const T* gp = static_cast<const T*>(g.data());
    std::array<T*, K> sp;
    for (size_t k = 0; k < K; ++k) sp[k] = states[k].defined() ? static_cast<T*>(states[k].data()) : nullptr;
    parallel_for(0, p.numel(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        M pv = M(pp[i]);
        std::array<M, K> sv;
        for (size_t k = 0; k < K; ++k) sv[k] = sp[k] ? M(sp[k][i]) : M(0);
        std::apply([&](auto&... s) { math(pv, M(gp[i]), s...); }, sv);
        pp[i] = T(pv);
        for (size_t k = 0; k < K; ++k)
          if (sp[k]) sp[k][i] = T(sv[k]);
      }
    });
  });
  p.bump_version();
}

}  // namespace loom::optim
