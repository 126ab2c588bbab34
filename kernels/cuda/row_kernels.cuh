// What the CUDA row kernels share (softmax.cu, layer_norm.cu): how a row of a strided
// tensor is split over a group of threads, held in registers, folded and written.
//
// Note [rows in registers]
// A row of len elements (element i at row[i * stride]) belongs to a group of G threads:
// G = 4, 8, 16 or 32 lanes of a warp for rows up to 1024 elements (several rows a block),
// or the whole block of kBlockSize threads. Lane `lane` holds the elements
// (k * G + lane) * VEC + j, k < E, j < VEC, in registers (RowSlots), loaded once, so a
// kernel reading a row two or three times (a max, a sum, the writes) reads memory once.
// VEC > 1 (16-byte loads) needs a unit stride, len a multiple of VEC and 16-byte-aligned
// rows. Rows longer than the largest group holds (kBlockSize * 16 elements) are read from
// memory on every pass instead (RowStream, E == 0), which L2 mostly serves.
// Both give the same fold / store interface, so each kernel is written once. A group
// whose row is past the last one still runs the folds (on no elements) and the group
// reductions, which need every lane (Note [warp and block reductions]); it writes nothing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"

namespace loom::kernels::cuda {

template <int G_, int E_, int VEC_>
struct RowConfig {
  static constexpr int G = G_, E = E_, VEC = VEC_;
  static constexpr bool kCached = E > 0;
  static constexpr int kRowsPerBlock = kBlockSize / G;
};

// NR rows of T read at the same indices (a softmax backward's g and y), held in registers.
template <typename Config, int NR, typename T>
struct RowSlots {
  using M = opmath_t<T>;
  static constexpr int G = Config::G, VEC = Config::VEC, kSlots = Config::E * Config::VEC;
  M v[NR][kSlots];
  int lane;
  int64_t len;  // 0 for a group without a row

  __device__ static int64_t index(int lane, int s) { return (int64_t(s / VEC) * G + lane) * VEC + s % VEC; }

  __device__ RowSlots(const T* const (&rows)[NR], const int64_t (&strides)[NR], int lane_, int64_t len_)
      : lane(lane_), len(len_) {
#pragma unroll
    for (int r = 0; r < NR; ++r) {
#pragma unroll
      for (int k = 0; k < Config::E; ++k) {
        const int64_t i0 = index(lane, k * VEC);
        if constexpr (VEC > 1) {
          if (i0 < len) {
            const AlignedVector<T, VEC> vec = *reinterpret_cast<const AlignedVector<T, VEC>*>(rows[r] + i0);
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[r][k * VEC + j] = M(vec.v[j]);
          } else {
#pragma unroll
            for (int j = 0; j < VEC; ++j) v[r][k * VEC + j] = M(0);
          }
        } else {
          v[r][k] = i0 < len ? M(rows[r][i0 * strides[r]]) : M(0);
        }
      }
    }
  }

  // acc = f(acc, i, x0[i], ...) over this lane's elements.
  template <typename A, typename F>
  __device__ A fold(A acc, const F& f) const {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int64_t i = index(lane, s);
      if (i >= len) continue;
      if constexpr (NR == 1) acc = f(acc, i, v[0][s]);
      else acc = f(acc, i, v[0][s], v[1][s]);
    }
    return acc;
  }

  // out[i * stride] = T(value(i, x0[i], ...)) for this lane's elements.
  template <typename F>
  __device__ void store(T* out, int64_t stride, const F& value) const {
#pragma unroll
    for (int k = 0; k < Config::E; ++k) {
      const int64_t i0 = index(lane, k * VEC);
      if (i0 >= len) continue;
      if constexpr (VEC > 1) {
        AlignedVector<T, VEC> vec;
#pragma unroll
        for (int j = 0; j < VEC; ++j) vec.v[j] = T(at(value, k * VEC + j, i0 + j));
        *reinterpret_cast<AlignedVector<T, VEC>*>(out + i0) = vec;
      } else {
        out[i0 * stride] = T(at(value, k, i0));
      }
    }
  }

 private:
  template <typename F>
  __device__ M at(const F& value, int s, int64_t i) const {
    if constexpr (NR == 1) return value(i, v[0][s]);
    else return value(i, v[0][s], v[1][s]);
  }
};

// The same interface over memory: every fold and store reads the rows again.
template <typename Config, int NR, typename T>
struct RowStream {
  using M = opmath_t<T>;
  static constexpr int G = Config::G;
  const T* rows[NR];
  int64_t strides[NR];
  int lane;
  int64_t len;

  __device__ RowStream(const T* const (&rows_)[NR], const int64_t (&strides_)[NR], int lane_, int64_t len_)
      : lane(lane_), len(len_) {
#pragma unroll
    for (int r = 0; r < NR; ++r) rows[r] = rows_[r], strides[r] = strides_[r];
  }

  template <typename A, typename F>
  __device__ A fold(A acc, const F& f) const {
    for (int64_t i = lane; i < len; i += G) {
      if constexpr (NR == 1) acc = f(acc, i, M(rows[0][i * strides[0]]));
      else acc = f(acc, i, M(rows[0][i * strides[0]]), M(rows[1][i * strides[1]]));
    }
    return acc;
  }

  template <typename F>
  __device__ void store(T* out, int64_t stride, const F& value) const {
    for (int64_t i = lane; i < len; i += G) {
      if constexpr (NR == 1) out[i * stride] = T(value(i, M(rows[0][i * strides[0]])));
      else out[i * stride] = T(value(i, M(rows[0][i * strides[0]]), M(rows[1][i * strides[1]])));
    }
  }
};

template <typename Config, int NR, typename T>
using Row = std::conditional_t<Config::kCached, RowSlots<Config, NR, T>, RowStream<Config, NR, T>>;

// The fold of v over the row's group (Note [warp and block reductions]), in every lane.
template <typename Config, typename S, typename Combine>
__device__ inline S row_reduce(S v, const Combine& combine, S identity) {
  if constexpr (Config::G == kBlockSize) return block_reduce(v, combine, identity);
  else return group_reduce<Config::G>(v, combine);
}

// Calls body(row, valid, lane) for every row of `rows` this thread's group takes, in a
// grid-stride loop that is the same for the whole block: a group past the last row gets
// row 0 with valid false, and must still run its group reductions (writing nothing).
template <typename Config, typename Body>
__device__ inline void for_each_row(int64_t rows, const Body& body) {
  const int lane = int(threadIdx.x) % Config::G, group = int(threadIdx.x) / Config::G;
  for (int64_t base = int64_t(blockIdx.x) * Config::kRowsPerBlock; base < rows;
       base += int64_t(gridDim.x) * Config::kRowsPerBlock) {
    const int64_t row = base + group;
    body(row < rows ? row : 0, row < rows, lane);
  }
}

// ---- host side ---------------------------------------------------------------------------------

constexpr int64_t kRowCacheMax = int64_t(kBlockSize) * 16;  // the longest row held in registers

// Calls f.template operator()<Config>() with the RowConfig for rows of len: the smallest
// group that holds the row (a warp up to 1024 elements, the block up to kRowCacheMax,
// 16-byte loads when `vectors` and T allow), else the block reading memory on each pass.
template <typename T, typename F>
void dispatch_row_config(int64_t len, bool vectors, F&& f) {
  constexpr int VEC = int(16 / sizeof(T));
  if (len <= 4) return f.template operator()<RowConfig<4, 1, 1>>();
  if (len <= 8) return f.template operator()<RowConfig<8, 1, 1>>();
  if (len <= 16) return f.template operator()<RowConfig<16, 1, 1>>();
  if (len <= 32) return f.template operator()<RowConfig<32, 1, 1>>();
  if (len <= 64) return f.template operator()<RowConfig<32, 2, 1>>();
  if (len <= 128) return f.template operator()<RowConfig<32, 4, 1>>();
  if (len <= 256) return f.template operator()<RowConfig<32, 8, 1>>();
  if (len <= 512) return f.template operator()<RowConfig<32, 16, 1>>();
  if (len <= 1024) return f.template operator()<RowConfig<32, 32, 1>>();
  if (len <= kRowCacheMax) {
    if (vectors && len % VEC == 0) return f.template operator()<RowConfig<kBlockSize, 16 / VEC, VEC>>();
    return f.template operator()<RowConfig<kBlockSize, 16, 1>>();
  }
  return f.template operator()<RowConfig<kBlockSize, 0, 1>>();
}

// Blocks for `rows` rows of groups of Config: one block per kRowsPerBlock rows, so that the
// scheduler balances the rows over the SMs (a grid capped at a few waves of a grid-stride
// loop gives some blocks a row more than others to do after the rest have finished).
template <typename Config>
unsigned row_blocks(int64_t rows) {
  const int64_t blocks = (rows + Config::kRowsPerBlock - 1) / Config::kRowsPerBlock;
  return unsigned(std::clamp<int64_t>(blocks, 1, std::numeric_limits<int32_t>::max()));
}


}  // namespace loom::kernels::cuda
