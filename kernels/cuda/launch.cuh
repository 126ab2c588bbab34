// The CUDA elementwise loops. gpu_elementwise<Out, In...>(out, f, {&in0, ...}) writes
// out[i] = Out(f(in0[i], in1[i], ...)) for N same-shaped strided tensors, on the current
// stream of out's device, as kernels/cpu/loops.h's elementwise does on the CPU (f gets
// opmath values: float for the 16-bit floats). gpu_random<Out, In...>(out, seed, offset,
// f, {...}) does the same with element i's two Philox words first in f's arguments.
//
// Note [elementwise launch]
// Two paths:
// - vectorised, when every operand is contiguous after coalescing and its pointer is
//   aligned to a whole vector: each thread step loads and stores VEC elements per operand
//   as one aligned access, VEC = 16 bytes / the widest element (4 floats, 8 halves; a
//   bool output next to float inputs moves 4 bytes); the n % VEC tail goes element-wise.
// - strided, otherwise (transposed, sliced, broadcast with stride 0, misaligned): each
//   element finds its operands' byte offsets with an OffsetCalculator
//   (kernels/cuda/offset_calculator.cuh), 32-bit when everything fits.
// Both are grid-stride loops over a grid capped at a few blocks per SM, so any size works
// with any grid. The loop bodies are LOOM_HOST_DEVICE functions of (thread, thread count),
// which the kernels call with their global thread index and the host tests call in a loop:
// the index arithmetic is tested without a GPU.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "core/generator.h"
#include "kernels/cuda/device_properties.h"
#include "kernels/cuda/offset_calculator.cuh"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include "core/cuda.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/philox_args.h"
#endif

namespace loom::kernels::cuda {

constexpr int kBlockSize = 256;

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) AlignedVector {
  T v[VEC];
};

// Elements per vector: 16 bytes of the widest operand.
template <typename Out, typename... In>
constexpr int vector_width() {
  return int(16 / std::max({sizeof(Out), sizeof(In)...}));
}

// ---- loop bodies ---------------------------------------------------------------------------

template <int VEC, typename F, typename Out, typename... In>
LOOM_HOST_DEVICE inline void apply_vector(const F& f, AlignedVector<Out, VEC>* out,
                                          AlignedVector<In, VEC>... x) {
  AlignedVector<Out, VEC> o;
  LOOM_UNROLL
  for (int j = 0; j < VEC; ++j) o.v[j] = Out(f(opmath_t<In>(x.v[j])...));
  *out = o;
}

// All operands contiguous and aligned to VEC elements; n elements.
template <int VEC, typename F, typename Out, typename... In>
LOOM_HOST_DEVICE void vectorized_loop(int64_t thread, int64_t threads, int64_t n, const F& f, Out* out,
                                      const In*... in) {
  const int64_t vectors = n / VEC;
  for (int64_t v = thread; v < vectors; v += threads) {
    apply_vector<VEC>(f, reinterpret_cast<AlignedVector<Out, VEC>*>(out) + v,
                      reinterpret_cast<const AlignedVector<In, VEC>*>(in)[v]...);
  }
  for (int64_t i = vectors * VEC + thread; i < n; i += threads) out[i] = Out(f(opmath_t<In>(in[i])...));
}

// Any strides: ptrs[0] is the output's first byte, ptrs[k + 1] input k's.
template <typename Out, typename... In, typename F, typename index_t, size_t... I>
LOOM_HOST_DEVICE void strided_loop_impl(index_t thread, index_t threads, index_t n, const F& f,
                                        const OffsetCalculator<sizeof...(In) + 1, index_t>& calc,
                                        const Array<char*, sizeof...(In) + 1>& ptrs, std::index_sequence<I...>) {
  for (index_t i = thread; i < n; i += threads) {
    const Array<index_t, sizeof...(In) + 1> off = calc.get(i);
    *reinterpret_cast<Out*>(ptrs[0] + off[0]) =
        Out(f(opmath_t<In>(*reinterpret_cast<const In*>(ptrs[I + 1] + off[I + 1]))...));
  }
}

template <typename Out, typename... In, typename F, typename index_t>
LOOM_HOST_DEVICE void strided_loop(index_t thread, index_t threads, index_t n, const F& f,
                                   const OffsetCalculator<sizeof...(In) + 1, index_t>& calc,
                                   const Array<char*, sizeof...(In) + 1>& ptrs) {
  strided_loop_impl<Out, In...>(thread, threads, n, f, calc, ptrs, std::index_sequence_for<In...>{});
}

// Random fills: out[i] = Out(f(w0, w1, in[i]...)) with w0, w1 the two Philox words of
// element i (kernels/math/random_math.h). Elements 2j and 2j+1 share block offset + j (words
// 0, 1 and 2, 3), so each thread step computes one block and writes that pair.
template <typename Out, typename... In, typename F, typename index_t, size_t... I>
LOOM_HOST_DEVICE void random_loop_impl(index_t thread, index_t threads, index_t n, uint64_t seed, uint64_t offset,
                                       const F& f, const OffsetCalculator<sizeof...(In) + 1, index_t>& calc,
                                       const Array<char*, sizeof...(In) + 1>& ptrs, std::index_sequence<I...>) {
  const index_t pairs = n / 2 + n % 2;
  for (index_t j = thread; j < pairs; j += threads) {
    const std::array<uint32_t, 4> words = Philox::block(seed, offset + uint64_t(j));
    LOOM_UNROLL
    for (int e = 0; e < 2; ++e) {
      const index_t i = 2 * j + index_t(e);
      if (i >= n) break;
      const Array<index_t, sizeof...(In) + 1> off = calc.get(i);
      *reinterpret_cast<Out*>(ptrs[0] + off[0]) = Out(
          f(words[2 * e], words[2 * e + 1], opmath_t<In>(*reinterpret_cast<const In*>(ptrs[I + 1] + off[I + 1]))...));
    }
  }
}

template <typename Out, typename... In, typename F, typename index_t>
LOOM_HOST_DEVICE void random_loop(index_t thread, index_t threads, index_t n, uint64_t seed, uint64_t offset,
                                  const F& f, const OffsetCalculator<sizeof...(In) + 1, index_t>& calc,
                                  const Array<char*, sizeof...(In) + 1>& ptrs) {
  random_loop_impl<Out, In...>(thread, threads, n, seed, offset, f, calc, ptrs, std::index_sequence_for<In...>{});
}

// ---- host side: choosing the path ----------------------------------------------------------

// True when the vectorised path applies: one coalesced dim, unit element strides, and each
// pointer aligned to VEC of its elements.
template <int VEC, int N>
bool can_vectorize(const cpu::StridedLayout<N>& layout, const std::array<const Tensor*, N>& operands) {
  if (layout.sizes.size() != 1) return false;
  for (int k = 0; k < N; ++k) {
    const int64_t size = operands[k]->element_size();
    if (layout.strides[k][0] != size) return false;
    if (reinterpret_cast<uintptr_t>(operands[k]->data()) % uintptr_t(size * VEC) != 0) return false;
  }
  return true;
}

// {&out, ins...}
template <size_t NIN>
std::array<const Tensor*, NIN + 1> with_output(const Tensor& out, const std::array<const Tensor*, NIN>& ins) {
  std::array<const Tensor*, NIN + 1> operands{&out};
  std::copy(ins.begin(), ins.end(), operands.begin() + 1);
  return operands;
}

template <int N>
Array<char*, N> base_pointers(const std::array<const Tensor*, N>& operands) {
  Array<char*, N> ptrs;
  for (int k = 0; k < N; ++k) ptrs[k] = static_cast<char*>(operands[k]->data());
  return ptrs;
}

#if defined(__CUDACC__)

// ---- kernels -------------------------------------------------------------------------------

template <int VEC, typename F, typename Out, typename... In>
__global__ void __launch_bounds__(kBlockSize)
    vectorized_kernel(int64_t n, F f, Out* out, const In*... in) {
  vectorized_loop<VEC>(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, n, f,
                       out, in...);
}

// (The element types come last: a __global__ template must end with its pack.)
template <typename F, typename index_t, typename Out, typename... In>
__global__ void __launch_bounds__(kBlockSize)
    strided_kernel(index_t n, F f, OffsetCalculator<sizeof...(In) + 1, index_t> calc,
                   Array<char*, sizeof...(In) + 1> ptrs) {
  strided_loop<Out, In...>(index_t(blockIdx.x * blockDim.x + threadIdx.x), index_t(gridDim.x * blockDim.x), n,
                           f, calc, ptrs);
}

template <typename F, typename index_t, typename Out, typename... In>
__global__ void __launch_bounds__(kBlockSize)
    random_kernel(index_t n, ::loom::cuda::PhiloxArgs philox, F f, OffsetCalculator<sizeof...(In) + 1, index_t> calc,
                  Array<char*, sizeof...(In) + 1> ptrs) {
  random_loop<Out, In...>(index_t(blockIdx.x * blockDim.x + threadIdx.x), index_t(gridDim.x * blockDim.x), n,
                          philox.key(), philox.counter(), f, calc, ptrs);
}

// ---- launching -----------------------------------------------------------------------------

// The stream kernels on `device` launch on (Note [current stream] in kernels/cuda/device.cpp).
inline cudaStream_t current_stream(int device) {
  return static_cast<cudaStream_t>(::loom::cuda::Stream::current(device).handle());
}

// Blocks for `items` thread-sized work items: enough to fill the GPU a few times over,
// then the grid-stride loops take the rest.
inline unsigned grid_size(int64_t items, int device) {
  const int64_t max_blocks = int64_t(device_properties(device).sms) * (2048 / kBlockSize);
  return unsigned(std::clamp<int64_t>((items + kBlockSize - 1) / kBlockSize, 1, max_blocks));
}

// out[i] = Out(f(in[i]...)) on the current stream of out's device (Note [elementwise launch]).
template <typename Out, typename... In, typename F>
void gpu_elementwise(const Tensor& out, const F& f, const std::array<const Tensor*, sizeof...(In)>& ins) {
  constexpr int N = sizeof...(In) + 1;
  const int64_t n = out.numel();
  if (n == 0) return;
  const std::array<const Tensor*, N> operands = with_output(out, ins);
  const int device = out.device().index;
  ::loom::cuda::DeviceGuard guard(out.device());
  const cudaStream_t stream = current_stream(device);
  const cpu::StridedLayout<N> layout = coalesced_layout<N>(operands);
  constexpr int VEC = vector_width<Out, In...>();
  if (can_vectorize<VEC, N>(layout, operands)) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      vectorized_kernel<VEC><<<grid_size((n + VEC - 1) / VEC, device), kBlockSize, 0, stream>>>(
          n, f, static_cast<Out*>(out.data()), static_cast<const In*>(ins[I]->data())...);
    }(std::index_sequence_for<In...>{});
  } else if (fits_in_32_bits<N>(layout)) {
    strided_kernel<F, uint32_t, Out, In...><<<grid_size(n, device), kBlockSize, 0, stream>>>(
        uint32_t(n), f, make_offset_calculator<N, uint32_t>(layout), base_pointers<N>(operands));
  } else {
    strided_kernel<F, int64_t, Out, In...><<<grid_size(n, device), kBlockSize, 0, stream>>>(
        n, f, make_offset_calculator<N, int64_t>(layout), base_pointers<N>(operands));
  }
  LOOM_CUDA_KERNEL_CHECK();
}

// Random fill of out (any strides) on the current stream of its device: element i (in
// row-major order) is Out(f(w0, w1, in[i]...)), its words those of the CPU fill.
template <typename Out, typename... In, typename F>
void gpu_random(const Tensor& out, uint64_t seed, uint64_t offset, const F& f,
                const std::array<const Tensor*, sizeof...(In)>& ins) {
  constexpr int N = sizeof...(In) + 1;
  const int64_t n = out.numel();
  if (n == 0) return;
  const std::array<const Tensor*, N> operands = with_output(out, ins);
  const int device = out.device().index;
  // Graph-relative while capturing (Note [graph-safe random numbers]).
  const ::loom::cuda::PhiloxArgs philox = ::loom::cuda::detail::philox_args(
      device, seed, offset, "random numbers (dropout, rand, randn, bernoulli, randint)");
  ::loom::cuda::DeviceGuard guard(out.device());
  const cudaStream_t stream = current_stream(device);
  const cpu::StridedLayout<N> layout = coalesced_layout<N>(operands);
  const unsigned blocks = grid_size((n + 1) / 2, device);
  if (fits_in_32_bits<N>(layout)) {
    random_kernel<F, uint32_t, Out, In...><<<blocks, kBlockSize, 0, stream>>>(
        uint32_t(n), philox, f, make_offset_calculator<N, uint32_t>(layout), base_pointers<N>(operands));
  } else {
    random_kernel<F, int64_t, Out, In...><<<blocks, kBlockSize, 0, stream>>>(
        n, philox, f, make_offset_calculator<N, int64_t>(layout), base_pointers<N>(operands));
  }
  LOOM_CUDA_KERNEL_CHECK();
}

#endif  // __CUDACC__

}  // namespace loom::kernels::cuda
