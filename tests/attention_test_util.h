// The step the attention tests compare: out = sdpa(q, k, v) and the gradients of
// sum(out * gy) with respect to q, k and v (tests/test_attention*.cpp).
#pragma once

#include "loom.h"

namespace loom::test {

struct SdpaGrads {
  Tensor out, dq, dk, dv;
};

// Runs `sdpa` on leaf copies of q0, k0, v0 that require grad, on their device.
template <typename Fn>
SdpaGrads sdpa_grads(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& gy, Fn&& sdpa) {
  Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true),
         v = v0.detach().requires_grad_(true);
  const Tensor out = sdpa(q, k, v);
  (out * gy).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

}  // namespace loom::test
