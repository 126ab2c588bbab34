// CPU fused optimizer updates (kernels::sgd_update, adam_update, rmsprop_update): per step,
// one parallel pass over each parameter, its gradient and its states, running the
// per-element math of kernels/math/optim_math.h — the same math as the CUDA kernel.
//
// Note [vectorised optimizer updates]
// update_element tests each state pointer per element (an undefined state is a scratch 0),
// which keeps the compiler from vectorising the loop; the update is then bound by scalar
// square roots and divisions rather than by memory. Here a run of up to kRun elements has
// every state present — an undefined one replaced by a zeroed scratch run — so the loop
// has no per-element test (the math's own tests are the same for every element) and
// vectorises, per x86 vector width for float (LOOM_CPU_CLONES); the file is compiled with
// -fno-math-errno (CMakeLists.txt), without which each square root keeps a branch to set
// errno that stops the vectoriser.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/math/optim_math.h"

namespace loom::kernels::cpu {
namespace {

constexpr int64_t kRun = 4096;  // elements per run: K scratch runs stay in L1

// Elements [0, n) of p, g and every state (all present), in opmath.
// Copies of the math and the pointers: a store through p may not alias them, so the
// math's tests are loop-invariant and the loop vectorises.
template <typename T, size_t K, typename Math, size_t... I>
inline void update_run(const Math& math_in, int64_t n, T* p, const T* g, const std::array<T*, K>& s_in,
                       std::index_sequence<I...>) {
  using M = opmath_t<T>;
  const Math math = math_in;
  const std::array<T*, K> s = s_in;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    M pv = M(p[i]);
    M sv[K] = {M(s[I][i])...};
    math(pv, M(g[i]), sv[I]...);
    p[i] = T(pv);
    ((s[I][i] = T(sv[I])), ...);
  }
}

template <typename T, size_t K, typename Math>
inline void update(const Math& math, int64_t n, T* p, const T* g, const std::array<T*, K>& s) {
  update_run<T, K>(math, n, p, g, s, std::make_index_sequence<K>{});
}

// The float runs per x86 vector width.
LOOM_CPU_CLONES void sgd_f32(const SgdMath<float>& m, int64_t n, float* p, const float* g,
                             const std::array<float*, 1>& s) {
  update<float, 1>(m, n, p, g, s);
}
LOOM_CPU_CLONES void adam_f32(const AdamMath<float>& m, int64_t n, float* p, const float* g,
                              const std::array<float*, 3>& s) {
  update<float, 3>(m, n, p, g, s);
}
LOOM_CPU_CLONES void rmsprop_f32(const RmspropMath<float>& m, int64_t n, float* p, const float* g,
                                 const std::array<float*, 3>& s) {
  update<float, 3>(m, n, p, g, s);
}
void run_f32(const SgdMath<float>& m, int64_t n, float* p, const float* g, const std::array<float*, 1>& s) {
  sgd_f32(m, n, p, g, s);
}
void run_f32(const AdamMath<float>& m, int64_t n, float* p, const float* g, const std::array<float*, 3>& s) {
  adam_f32(m, n, p, g, s);
}
void run_f32(const RmspropMath<float>& m, int64_t n, float* p, const float* g, const std::array<float*, 3>& s) {
  rmsprop_f32(m, n, p, g, s);
}

template <size_t K, template <typename> class MathT>
void update_one(const char* op, const Tensor& p, const Tensor& g, const std::array<Tensor, K>& states,
                const MathT<double>& math_in_double) {
  dispatch_floating(p.dtype(), op, [&]<typename T>() {
    const auto math = narrow<opmath_t<T>>(math_in_double);
    T* pp = static_cast<T*>(p.data());
    const T* gp = static_cast<const T*>(g.data());
    std::array<T*, K> sp;
    for (size_t k = 0; k < K; ++k) sp[k] = states[k].defined() ? static_cast<T*>(states[k].data()) : nullptr;
    parallel_for(0, p.numel(), 16384, [&](int64_t begin, int64_t end) {
      thread_local std::vector<T> scratch;  // K runs; an absent state's values start at 0
      scratch.resize(K * kRun);
      for (int64_t b = begin; b < end; b += kRun) {
        const int64_t n = std::min(kRun, end - b);
        std::array<T*, K> s;
        for (size_t k = 0; k < K; ++k) {
          s[k] = sp[k] ? sp[k] + b : scratch.data() + k * kRun;
          if (!sp[k]) std::fill_n(s[k], n, T(0));
        }
        if constexpr (std::is_same_v<T, float>) run_f32(math, n, pp + b, gp + b, s);
        else update<T, K>(math, n, pp + b, gp + b, s);
      }
    });
  });
}

// A () tensor's value: the CPU backend's tensors are in host memory (a capturable step's
// scalars on the CPU, or on the host-emulated cuda:0), read without a copy.
template <typename T>
T& host_value(const Tensor& t) {
  return *static_cast<T*>(t.data());
}

// Each parameter in turn, with its math from update_math: from the host's lr and counts
// (eager) or from the scalar tensors (capturable, after advancing the counts), the same
// formula on the same host, so the two agree bit for bit (Note [capturable optimizers]).
template <size_t K, typename Hyper>
void fused_update(const char* op, const ParamList<K>& list, const Hyper& hyper, const UpdateScalars& scalars) {
  const bool capturable = scalars.device_lr.defined();
  if (capturable && scalars.found_inf.defined() && host_value<float>(scalars.found_inf) != 0.0f) return;
  const double lr = capturable ? host_value<double>(scalars.device_lr) : scalars.lr;
  for (size_t i = 0; i < list.params.size(); ++i) {
    double step = 0;
    if (!capturable) {
      step = scalars.steps[i];
    } else if (!scalars.device_steps.empty()) {
      step = host_value<double>(scalars.device_steps[i]) += 1;
    }
    update_one<K>(op, list.params[i], list.grads[i], list.states[i], update_math(hyper, lr, step));
  }
}

}  // namespace

void add_optimizer_kernels(Backend& b) {
  b.sgd_update = &fused_update<1, SgdHyper>;
  b.adam_update = &fused_update<3, AdamHyper>;
  b.rmsprop_update = &fused_update<3, RmspropHyper>;
}

}  // namespace loom::kernels::cpu
