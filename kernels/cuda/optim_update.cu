// CUDA kernels for the optimizers' fused updates (kernels::sgd_update, adam_update,
// rmsprop_update).
//
// Note [fused optimizer updates]
// One launch updates a list of parameters (up to kMaxListTensors; Note [multi-tensor
// launches] in kernels/cuda/multi_tensor.cuh): each block takes one chunk of one parameter
// and runs update_element (kernels/math/optim_math.h), the same per-element code as the CPU loop,
// over it. Where a parameter's math comes from is the only difference between the two kinds
// of step (Note [capturable optimizers] in optim/optimizer.h):
// - eager: the host has computed it (update_math in double, from the group's lr and the
//   parameter's count) and narrowed it to the opmath type; it rides in the kernel's argument,
//   one per parameter, as it did when each parameter had its own launch — the results are
//   those of that launch, bit for bit;
// - capturable: the kernel reads the lr and the parameter's count from device memory and
//   computes update_math there, so a captured step replays with the lr a scheduler wrote
//   since and the counts the replays advanced. A launch before it advances the counts (one
//   thread per parameter); with GradScaler's found_inf nonzero both do nothing.
// The router has checked the operands.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/math/optim_math.h"

namespace loom::kernels::cuda {
namespace {

// The kernel's argument: one launch's parameters and where their math comes from.
template <typename T, size_t K, typename Hyper>
struct UpdateLaunch {
  using Math = decltype(narrow<opmath_t<T>>(update_math(Hyper{}, 0.0, 0.0)));
  ListChunks chunks;
  T* p[kMaxListTensors];
  const T* g[kMaxListTensors];
  T* states[K][kMaxListTensors];  // null: a state the options switch off
  Math math[kMaxListTensors];     // eager
  // capturable (lr non-null):
  const double* lr = nullptr;
  const double* step[kMaxListTensors];  // null: an optimizer that counts no steps
  const float* found_inf = nullptr;     // null: none given
  Hyper hyper;
};

template <typename T, size_t K, typename Hyper>
__global__ void __launch_bounds__(kBlockSize) update_list_kernel(UpdateLaunch<T, K, Hyper> a) {
  int64_t begin = 0, end = 0;
  const int t = a.chunks.tensor_of(int(blockIdx.x), begin, end);
  typename UpdateLaunch<T, K, Hyper>::Math math;
  if (a.lr != nullptr) {
    if (a.found_inf != nullptr && *a.found_inf != 0.0f) return;
    math = narrow<opmath_t<T>>(update_math(a.hyper, *a.lr, a.step[t] != nullptr ? *a.step[t] : 0.0));
  } else {
    math = a.math[t];
  }
  T* states[K];
  for (size_t k = 0; k < K; ++k) states[k] = a.states[k][t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    update_element<T, K>(math, i, a.p[t], a.g[t], states);
}

// step[t] += 1 for each parameter of a capturable launch, unless found_inf is nonzero.
struct AdvanceLaunch {
  int count = 0;
  double* step[kMaxListTensors];
  const float* found_inf = nullptr;
};

__global__ void advance_steps_kernel(AdvanceLaunch a) {
  const int t = int(threadIdx.x);
  if (t >= a.count || (a.found_inf != nullptr && *a.found_inf != 0.0f)) return;
  *a.step[t] += 1.0;
}

template <typename T>
T* data(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data()) : nullptr;
}

template <size_t K, typename Hyper>
void fused_update(const char* op, const ParamList<K>& list, const Hyper& hyper, const UpdateScalars& scalars) {
  const Tensor& first = list.params.front();
  const int device = first.device().index;
  ::loom::cuda::DeviceGuard guard(first.device());
  const cudaStream_t stream = current_stream(device);
  const bool capturable = scalars.device_lr.defined();
  std::vector<int64_t> numel;
  for (const Tensor& p : list.params) numel.push_back(p.numel());
  dispatch_floating(first.dtype(), op, [&]<typename T>() {
    for_each_list_launch(numel, [&](const ListChunks& chunks, const std::vector<size_t>& which) {
      UpdateLaunch<T, K, Hyper> a;
      a.chunks = chunks;
      a.hyper = hyper;
      AdvanceLaunch advance;
      for (int t = 0; t < chunks.count; ++t) {
        const size_t i = which[size_t(t)];
        a.p[t] = data<T>(list.params[i]);
        a.g[t] = data<const T>(list.grads[i]);
        for (size_t k = 0; k < K; ++k) a.states[k][t] = data<T>(list.states[i][k]);
        a.step[t] = nullptr;
        if (!capturable) {
          a.math[t] = narrow<opmath_t<T>>(update_math(hyper, scalars.lr, scalars.steps[i]));
        } else if (!scalars.device_steps.empty()) {
          a.step[t] = advance.step[advance.count++] = data<double>(scalars.device_steps[i]);
        }
      }
      if (capturable) {
        a.lr = data<const double>(scalars.device_lr);
        a.found_inf = advance.found_inf = data<const float>(scalars.found_inf);
        if (advance.count > 0) {
          advance_steps_kernel<<<1, kMaxListTensors, 0, stream>>>(advance);
          LOOM_CUDA_KERNEL_CHECK();
        }
      }
      update_list_kernel<T, K, Hyper><<<unsigned(chunks.blocks()), kBlockSize, 0, stream>>>(a);
      LOOM_CUDA_KERNEL_CHECK();
    });
  });
}

}  // namespace

void add_optimizer_kernels(Backend& b) {
  b.sgd_update = &fused_update<1, SgdHyper>;
  b.adam_update = &fused_update<3, AdamHyper>;
  b.rmsprop_update = &fused_update<3, RmspropHyper>;
}

}  // namespace loom::kernels::cuda
