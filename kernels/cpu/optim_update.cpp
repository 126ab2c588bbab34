// CPU fused optimizer updates (kernels::sgd_update, adam_update, rmsprop_update): one
// parallel pass over a parameter, its gradient and its states per step, running
// update_element (kernels/optim_math.h) — the same per-element code as the CUDA kernel.
#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/optim_math.h"

namespace loom::kernels::cpu {
namespace {

template <size_t K, template <typename> class MathT>
void fused_update(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, K>& states,
                  const MathT<double>& math_in_double) {
  dispatch_floating(p.dtype(), op, [&]<typename T>() {
    const auto math = narrow<opmath_t<T>>(math_in_double);
    T* pp = static_cast<T*>(p.data());
    const T* gp = static_cast<const T*>(g.data());
    std::array<T*, K> sp;
    for (size_t k = 0; k < K; ++k) sp[k] = states[k].defined() ? static_cast<T*>(states[k].data()) : nullptr;
    parallel_for(0, p.numel(), 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) update_element<T, K>(math, i, pp, gp, sp.data());
    });
  });
}

}  // namespace

void add_optimizer_kernels(Backend& b) {
  b.sgd_update = &fused_update<1, SgdMath>;
  b.adam_update = &fused_update<3, AdamMath>;
  b.rmsprop_update = &fused_update<3, RmspropMath>;
}

}  // namespace loom::kernels::cpu
