// The warp and block reductions every reducing CUDA kernel uses (reduce.cu, softmax.cu,
// layer_norm.cu): a fold of one value per thread over a group of lanes, a whole block, or
// the threadIdx.y rows of a 2-D block.
//
// Note [warp and block reductions]
// - group_reduce<G>: lanes are taken in aligned groups of G (a power of two up to 32), and
//   every lane gets its group's fold, through G/2, G/4, ..., 1 xor-shuffles. All 32 lanes of
//   the warp must make the call (the shuffles name the full mask), so a kernel that gives
//   a group no row still runs it with its identity (the callers keep their loops uniform
//   per warp).
// - block_reduce: every thread of the block gets the block's fold: a warp fold, one slot
//   of shared memory per warp, then each warp folds the slots itself (no third barrier).
//   The leading __syncthreads makes a second call safe while a slow warp still reads the
//   slots of the first. blockDim.x is a multiple of 32 and blockDim.y == 1.
// - column_reduce: for a (X, Y) block, the fold over threadIdx.y of each threadIdx.x,
//   returned to every thread, through a halving tree in shared memory (Y a power of two).
// Every thread of the block must call block_reduce and column_reduce (they hold barriers).
// The fold order depends only on the thread layout, so results repeat run to run.
// State types other than arithmetic ones (an argmax's value and index, a variance's
// count, mean and squared deviations) give their own shfl_xor overload.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

namespace loom::kernels::cuda {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;

template <typename T>
  requires std::is_arithmetic_v<T>
__device__ inline T shfl_xor(T v, int lane_mask) {
  if constexpr (std::is_same_v<T, bool>) return bool(__shfl_xor_sync(kFullWarpMask, int(v), lane_mask));
  else return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}

// The sum, as a fold for the reductions below.
struct Add {
  template <typename M>
  __device__ M operator()(M a, M b) const { return a + b; }
};

// The fold of v over each aligned group of G lanes, in every lane of the group.
template <int G, typename S, typename Combine>
__device__ inline S group_reduce(S v, const Combine& combine) {
  static_assert(G >= 1 && G <= kWarpSize && (G & (G - 1)) == 0, "G: a power of two up to 32");
#pragma unroll
  for (int d = G / 2; d > 0; d /= 2) v = combine(v, shfl_xor(v, d));
  return v;
}

// Room in shared memory for one S per warp of a block (at most 32 warps).
template <typename S>
__device__ inline S* warp_slots() {
  __shared__ alignas(16) unsigned char bytes[kWarpSize * sizeof(S)];
  return reinterpret_cast<S*>(bytes);
}

// The fold of v over the whole block, in every thread.
template <typename S, typename Combine>
__device__ inline S block_reduce(S v, const Combine& combine, S identity) {
  S* slots = warp_slots<S>();
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  v = group_reduce<kWarpSize>(v, combine);
  __syncthreads();  // a previous call's reads of the slots are done
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  v = lane < warps ? slots[lane] : identity;
  return group_reduce<kWarpSize>(v, combine);
}

// The fold of v over threadIdx.y for each threadIdx.x, in every thread. The block has
// X * Y <= MaxThreads threads, Y a power of two.
template <int MaxThreads, typename S, typename Combine>
__device__ inline S column_reduce(S v, const Combine& combine) {
  __shared__ alignas(16) unsigned char bytes[MaxThreads * sizeof(S)];
  S* cell = reinterpret_cast<S*>(bytes);
  const int x = threadIdx.x, y = threadIdx.y, width = blockDim.x;
  __syncthreads();  // a previous call's reads of the cells are done
  cell[y * width + x] = v;
  __syncthreads();
  for (int half = blockDim.y / 2; half > 0; half /= 2) {
    if (y < half) cell[y * width + x] = combine(cell[y * width + x], cell[(y + half) * width + x]);
    __syncthreads();
  }
  return cell[x];
}

}  // namespace loom::kernels::cuda
