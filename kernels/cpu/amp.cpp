// CPU kernels of the gradient scaler (kernels::unscale_grads, update_scale): one parallel
// pass over each gradient that unscales it and notes a non-finite element, and the scale's
// update (kernels/math/amp_math.h). The router has checked the operands.
#include <atomic>

#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/math/amp_math.h"

namespace loom::kernels::cpu {
namespace {

void unscale_grad(const Tensor& g, const Tensor& found_inf, const Tensor& inv_scale) {
  const float inv = *static_cast<const float*>(inv_scale.data());
  std::atomic<bool> found{false};
  dispatch_floating(g.dtype(), "unscale_grads", [&]<typename T>() {
    using M = opmath_t<T>;
    T* p = static_cast<T*>(g.data());
    parallel_for(0, g.numel(), 16384, [&](int64_t b, int64_t e) {
      bool bad = false;
      for (int64_t i = b; i < e; ++i) {
        const M v = M(p[i]);
        bad |= !finite(v);
        p[i] = T(v * M(inv));
      }
      if (bad) found.store(true, std::memory_order_relaxed);
    });
  });
  if (found.load()) *static_cast<float*>(found_inf.data()) = 1.0f;
}

void unscale_grads(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  for (const Tensor& g : grads) unscale_grad(g, found_inf, inv_scale);
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval) {
  update_scale_math(*static_cast<float*>(scale.data()), *static_cast<int32_t*>(growth_tracker.data()),
                    *static_cast<const float*>(found_inf.data()) != 0.0f, float(growth_factor), float(backoff_factor),
                    int32_t(growth_interval));
}

}  // namespace

void add_amp_kernels(Backend& b) {
  b.unscale_grads = &unscale_grads;
  b.update_scale = &update_scale;
}

}  // namespace loom::kernels::cpu
