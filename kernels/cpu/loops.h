// The CPU elementwise loop: visits every element of N same-shaped strided tensors.
//
// Note [strided loops]
// Dims of size 1 are dropped and neighbouring dims that are contiguous with each other
// in every operand are merged, so a contiguous tensor of any rank becomes one flat run.
// The innermost run is handed to an `inner(ptrs, byte_strides, n)` callback; the
// elementwise helper below specialises that run for the all-contiguous case (a plain
// indexed loop the compiler vectorises) and for a stride-0 scalar operand. The outer
// index space is split across threads by parallel_for when large.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace loom::kernels::cpu {

template <size_t N>
struct StridedLayout {
  Shape sizes;                                // after coalescing; at least one dim
  std::array<std::vector<int64_t>, N> strides;  // in bytes, per operand
};

// operands[0] is usually the output; all share `shape`.
template <size_t N>
StridedLayout<N> coalesce(const Shape& shape, const std::array<const Tensor*, N>& operands) {
  StridedLayout<N> L;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    L.sizes.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k)
      L.strides[k].push_back(operands[k]->stride(int64_t(d)) * operands[k]->element_size());
  }
  if (L.sizes.empty()) {
    L.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) L.strides[k].push_back(0);
  }
  // Merge dim d into d+1 (inner) when stride[d] == stride[d+1] * size[d+1] for all.
  Shape sizes{L.sizes.back()};
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = {L.strides[k].back()};
  for (int64_t d = int64_t(L.sizes.size()) - 2; d >= 0; --d) {
    bool mergeable = true;
    for (size_t k = 0; k < N; ++k)
      mergeable &= L.strides[k][d] == strides[k].front() * sizes.front();
    if (mergeable) {
      sizes.front() *= L.sizes[d];
    } else {
      sizes.insert(sizes.begin(), L.sizes[d]);
      for (size_t k = 0; k < N; ++k) strides[k].insert(strides[k].begin(), L.strides[k][d]);
    }
  }
  L.sizes = std::move(sizes);
  L.strides = std::move(strides);
  return L;
}

// Calls inner(ptrs, inner_strides, n) for every innermost run.
template <size_t N, typename Inner>
void for_each_run(const Shape& shape, const std::array<const Tensor*, N>& operands, Inner&& inner,
                  bool parallel = true) {
  StridedLayout<N> L = coalesce<N>(shape, operands);
  const int64_t ndim = int64_t(L.sizes.size());
  const int64_t n_inner = L.sizes.back();
  int64_t n_outer = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) n_outer *= L.sizes[d];
  // Nothing to visit; and an outer size of 0 must not reach the odometer's divisions below.
  if (n_outer == 0 || n_inner == 0) return;
  std::array<char*, N> base;
  for (size_t k = 0; k < N; ++k) base[k] = static_cast<char*>(operands[k]->data());
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = L.strides[k].back();

  auto run_outer = [&](int64_t begin, int64_t end) {
    // Position of outer index `begin` in each operand.
    std::vector<int64_t> counter(size_t(std::max<int64_t>(ndim - 1, 0)), 0);
    std::array<char*, N> ptrs = base;
    int64_t rem = begin;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      counter[d] = rem % L.sizes[d];
      rem /= L.sizes[d];
      for (size_t k = 0; k < N; ++k) ptrs[k] += counter[d] * L.strides[k][d];
    }
    for (int64_t i = begin; i < end; ++i) {
      inner(ptrs, inner_strides, n_inner);
      for (int64_t d = ndim - 2; d >= 0; --d) {  // increment the odometer
        for (size_t k = 0; k < N; ++k) ptrs[k] += L.strides[k][d];
        if (++counter[d] < L.sizes[d]) break;
        for (size_t k = 0; k < N; ++k) ptrs[k] -= L.strides[k][d] * L.sizes[d];
        counter[d] = 0;
      }
    }
  };
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n_inner, 1));
  if (parallel && n_outer > 1 && n_outer * n_inner >= kParallelGrain) {
    parallel_for(0, n_outer, grain, run_outer);
  } else if (parallel && n_outer == 1 && n_inner >= 2 * kParallelGrain) {
    // One long run: split it.
    parallel_for(0, n_inner, kParallelGrain, [&](int64_t b, int64_t e) {
      std::array<char*, N> ptrs = base;
      for (size_t k = 0; k < N; ++k) ptrs[k] += b * inner_strides[k];
      inner(ptrs, inner_strides, e - b);
    });
  } else {
    run_outer(0, n_outer);
  }
}

// out[i] = f(in0[i], in1[i], ...), with Out and In the element types of the tensors.
// f is called with opmath values (float for 16-bit floats) and its result is converted
// to Out.
template <typename Out, typename... In, typename F>
void elementwise(const Tensor& out, F f, const std::array<const Tensor*, sizeof...(In)>& ins) {
  constexpr size_t N = sizeof...(In) + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < sizeof...(In); ++k) ops[k + 1] = ins[k];
  for_each_run<N>(out.sizes(), ops, [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s,
                                        int64_t n) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      Out* o = reinterpret_cast<Out*>(p[0]);
      std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
      bool contiguous = s[0] == int64_t(sizeof(Out)) && ((s[I + 1] == int64_t(sizeof(In))) && ...);
      if (contiguous) {
        for (int64_t i = 0; i < n; ++i)
          o[i] = Out(f(opmath_t<In>(std::get<I>(in)[i])...));
      } else {
        for (int64_t i = 0; i < n; ++i) {
          *reinterpret_cast<Out*>(p[0] + i * s[0]) =
              Out(f(opmath_t<In>(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1]))...));
        }
      }
    }(std::make_index_sequence<sizeof...(In)>{});
  });
}

}  // namespace loom::kernels::cpu
