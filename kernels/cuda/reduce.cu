// CUDA reductions along dims: reduce (sum, mean, max, min, prod), arg_reduce (max/min
// with indices), variance and cumsum, with the semantics of kernels/cpu/reduce.cpp and
// kernels/cpu/arg_reduce.cpp (opmath accumulation, NaN wins, first index on ties).
//
// Note [CUDA reduction kernels]
// The input is read in place as (outer, len, inner) (Note [reading reductions in place],
// kernels/cuda/reduce_geometry.h); only a layout no such view describes is copied first.
// What is folded is a Fold: its State (the opmath value; an argmax's value and index; a
// variance's count, mean and sum of squared deviations), how an element becomes one and
// how two combine, in any order. Two kernels fold:
// - rows (inner == 1, each output a row of len): a warp a row for rows up to 2048 elements
//   (8 rows a block), else the whole block. Contiguous 16-byte-aligned rows are read 16
//   bytes a load, 4 loads in flight per thread.
// - columns (inner > 1, e.g. a bias gradient, the sum over dim 0 of (B, N)): a (32, 8)
//   block takes 32 adjacent outputs (32 vectors of them when inner is contiguous and
//   aligned) of one outer index; its 8 rows of threads take every 8th step along len, each
//   load coalesced across the 32 lanes, and column_reduce folds the 8 partials.
// When the outputs alone cannot fill the GPU, len is split into chunks that separate
// blocks fold into a State buffer (a full sum of 64 M elements: about 1000 chunks); a
// second launch of the same kernels folds the chunks of each output in chunk order.
// Every launch's fold order depends only on the shapes, so results repeat run to run.
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_geometry.h"
#include "kernels/math/functors.h"
#include "kernels/math/reduce_math.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kUnroll = 4;             // vector loads in flight per thread in the rows kernel
constexpr int64_t kWarpRowMax = 2048;  // longer rows take a block each
constexpr int kColumnLanes = 32;       // columns kernel block: (kColumnLanes, kColumnRows)
constexpr int kColumnRows = kBlockSize / kColumnLanes;
constexpr int64_t kMinRowChunk = 4096;  // elements a block folds at least, when rows are split
constexpr int64_t kChunkAlign = 16;     // chunk lengths are a multiple of any vector width

template <typename M>
__device__ inline bool is_nan(M v) {
  return v != v;  // false for integers and bool
}

// ---- folds ----------------------------------------------------------------------------------

// sum, mean, max, min, prod (ReduceMath of kernels/math/reduce_math.h, shared with the CPU).
template <ReduceOp OP, typename M>
struct ValueFold {
  using State = M;
  __device__ State identity() const { return ReduceMath<OP, M>::identity(); }
  __device__ State load(M x, int64_t) const { return x; }
  __device__ State operator()(State a, State b) const { return ReduceMath<OP, M>::combine(a, b); }
};

// The value and index of a max or min; index < 0 marks "none yet".
template <typename M>
struct ArgState {
  M value;
  int64_t index;
};
template <typename M>
__device__ inline ArgState<M> shfl_xor(ArgState<M> s, int lane_mask) {
  using ::loom::kernels::cuda::shfl_xor;
  return {shfl_xor(s.value, lane_mask), shfl_xor(s.index, lane_mask)};
}

// A NaN beats any number, and among equals (or NaNs) the lower index wins, as the CPU's
// in-order scan: the result does not depend on the order of the folds.
template <typename M>
struct ArgFold {
  bool is_max;
  using State = ArgState<M>;
  __device__ State identity() const { return {M(0), -1}; }
  __device__ State load(M x, int64_t r) const { return {x, r}; }
  __device__ bool better(const State& a, const State& b) const {  // b replaces a
    if (b.index < 0) return false;
    if (a.index < 0) return true;
    const bool an = is_nan(a.value), bn = is_nan(b.value);
    if (an || bn) return an && bn ? b.index < a.index : bn;
    if (b.value == a.value) return b.index < a.index;
    return is_max ? b.value > a.value : b.value < a.value;
  }
  __device__ State operator()(State a, State b) const { return better(a, b) ? b : a; }
};

// Count, mean and sum of squared deviations (M2), combined by Chan's pairwise formula: no
// cancellation, one pass.
template <typename M>
struct MomentState {
  int64_t n;
  M mean, m2;
};
template <typename M>
__device__ inline MomentState<M> shfl_xor(MomentState<M> s, int lane_mask) {
  using ::loom::kernels::cuda::shfl_xor;
  return {shfl_xor(s.n, lane_mask), shfl_xor(s.mean, lane_mask), shfl_xor(s.m2, lane_mask)};
}

template <typename M>
struct MomentFold {
  using State = MomentState<M>;
  __device__ State identity() const { return {0, M(0), M(0)}; }
  __device__ State load(M x, int64_t) const { return {1, x, M(0)}; }
  __device__ State operator()(State a, State b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const int64_t n = a.n + b.n;
    const M delta = b.mean - a.mean, b_share = M(b.n) / M(n);
    return {n, a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * M(a.n) * b_share};
  }
};

// ---- sinks: what becomes of output k's State -------------------------------------------------

template <typename State>
struct PartialSink {  // a chunk's partial, folded by the second launch
  State* out;
  __device__ void operator()(int64_t k, const State& s) const { out[k] = s; }
};

// sum, max, min, prod: the State itself; mean: the sum over `count` (a flag rather than a
// template argument, so that sum and mean share their kernels).
template <typename T, typename M>
struct ValueSink {
  T* out;
  int64_t count;  // elements per output
  bool mean;
  __device__ void operator()(int64_t k, M s) const {
    out[k] = T(mean ? ReduceMath<ReduceOp::Mean, M>::finish(s, count) : s);
  }
};

template <typename T, typename M>
struct ArgSink {
  T* values;
  int64_t* indices;
  __device__ void operator()(int64_t k, const ArgState<M>& s) const {
    values[k] = T(s.value);
    indices[k] = s.index;
  }
};

template <typename T, typename M>
struct VarianceSink {
  T* out;
  M divisor;  // count - correction, at least 0: as the CPU, x / 0 gives inf or nan
  __device__ void operator()(int64_t k, const MomentState<M>& s) const { out[k] = T(s.m2 / divisor); }
};

// An element of the input as a State: raw elements through the fold's load, the partial
// States of a first launch as they are. (When In is the State type the load is the identity
// anyway: only ValueFold's State is an element type.)
template <typename Fold, typename In>
__device__ inline typename Fold::State as_state(const Fold& fold, const In& v, int64_t r) {
  using State = typename Fold::State;
  if constexpr (std::is_same_v<In, State>) return v;
  else return fold.load(opmath_t<In>(v), r);
}

// ---- kernels ---------------------------------------------------------------------------------

// Unit u = row * chunks + chunk folds elements [chunk * chunk_len, +chunk_len) of row `row`
// (element r at x[row * row_stride + r * elem_stride]) with G threads, and sink(u, fold).
// VEC > 1: elem_stride == 1, the rows and chunks start 16-byte aligned.
template <int G, int VEC, typename In, typename Fold, typename Sink>
__global__ void __launch_bounds__(kBlockSize)
    reduce_rows_kernel(const In* x, int64_t rows, int64_t len, int64_t row_stride, int64_t elem_stride,
                       int64_t chunks, int64_t chunk_len, Fold fold, Sink sink) {
  using State = typename Fold::State;
  constexpr int kSlots = kBlockSize / G;  // rows a block folds at once
  const int lane = threadIdx.x % G, slot = threadIdx.x / G;
  const int64_t units = rows * chunks;
  for (int64_t base = int64_t(blockIdx.x) * kSlots; base < units; base += int64_t(gridDim.x) * kSlots) {
    const int64_t u = base + slot;
    State acc = fold.identity();
    if (u < units) {
      const int64_t begin = (u % chunks) * chunk_len, end = min(len, begin + chunk_len);
      const In* p = x + (u / chunks) * row_stride;
      if constexpr (VEC > 1) {
        using Vec = AlignedVector<In, VEC>;
        const int64_t vectors = max(end - begin, int64_t(0)) / VEC;
        const Vec* pv = reinterpret_cast<const Vec*>(p + begin);
        for (int64_t v = lane; v < vectors; v += int64_t(G) * kUnroll) {
          Vec buf[kUnroll];
#pragma unroll
          for (int k = 0; k < kUnroll; ++k)
            if (v + k * G < vectors) buf[k] = pv[v + k * G];
#pragma unroll
          for (int k = 0; k < kUnroll; ++k) {
            if (v + k * G >= vectors) continue;
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc = fold(acc, as_state(fold, buf[k].v[j], begin + (v + k * G) * VEC + j));
          }
        }
        for (int64_t r = begin + vectors * VEC + lane; r < end; r += G) acc = fold(acc, as_state(fold, p[r], r));
      } else {
        for (int64_t r = begin + lane; r < end; r += G) acc = fold(acc, as_state(fold, p[r * elem_stride], r));
      }
    }
    if constexpr (G == kBlockSize) acc = block_reduce(acc, fold, fold.identity());
    else acc = group_reduce<G>(acc, fold);
    if (lane == 0 && u < units) sink(u, acc);
  }
}

// Unit b = (o * tiles + tile) * chunks + chunk folds, for the kColumnLanes * VEC outputs
// (o, i) of its tile, elements r in [chunk * chunk_len, +chunk_len) at x[o * outer_stride +
// r * len_stride + i * inner_stride]; sink(chunk * outer * inner + o * inner + i, fold).
// VEC > 1: inner_stride == 1, inner % VEC == 0, every (o, r) row of inner starts 16-byte
// aligned. Launched with (kColumnLanes, kColumnRows) threads.
template <int VEC, typename In, typename Fold, typename Sink>
__global__ void __launch_bounds__(kBlockSize)
    reduce_columns_kernel(const In* x, ReduceGeometry g, int64_t chunks, int64_t chunk_len, Fold fold, Sink sink) {
  using State = typename Fold::State;
  const int64_t tiles = (g.inner + kColumnLanes * VEC - 1) / (kColumnLanes * VEC);
  const int64_t units = g.outer * tiles * chunks;
  for (int64_t b = blockIdx.x; b < units; b += gridDim.x) {
    const int64_t chunk = b % chunks, tile = (b / chunks) % tiles, o = b / chunks / tiles;
    const int64_t i0 = (tile * kColumnLanes + threadIdx.x) * VEC;  // this thread's first column
    const int64_t begin = chunk * chunk_len, end = min(g.len, begin + chunk_len);
    State acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = fold.identity();
    if (i0 < g.inner) {
      const In* p = x + o * g.outer_stride;
      for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRows) {
        if constexpr (VEC > 1) {
          const AlignedVector<In, VEC> v = *reinterpret_cast<const AlignedVector<In, VEC>*>(p + r * g.len_stride + i0);
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] = fold(acc[j], as_state(fold, v.v[j], r));
        } else {
          acc[0] = fold(acc[0], as_state(fold, p[r * g.len_stride + i0 * g.inner_stride], r));
        }
      }
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const State s = column_reduce<kBlockSize>(acc[j], fold);
      if (threadIdx.y == 0 && i0 + j < g.inner) sink(chunk * g.outer * g.inner + o * g.inner + i0 + j, s);
    }
  }
}

// ---- host side: launching a fold ---------------------------------------------------------------

int64_t max_blocks(int device) { return grid_size(std::numeric_limits<int32_t>::max(), device); }

// Whether a dim of `size` with `stride` keeps VEC-element vectors aligned.
bool keeps_vectors(int64_t size, int64_t stride, int vec) { return size <= 1 || stride % vec == 0; }

// Room for n States on `device` (Loom has no byte dtype: int64 words), for chunk partials.
template <typename State>
Tensor state_buffer(int64_t n, int device) {
  return empty({int64_t(n * sizeof(State) + 7) / 8}, TensorOptions(kInt64).device(Device(DeviceType::CUDA, device)));
}

template <int G, int VEC, typename In, typename Fold, typename Sink>
void launch_rows(const In* x, int64_t rows, int64_t len, int64_t row_stride, int64_t elem_stride, int64_t chunks,
                 int64_t chunk_len, const Fold& fold, const Sink& sink, int device, cudaStream_t stream) {
  constexpr int64_t slots = kBlockSize / G;
  const int64_t blocks = std::min<int64_t>((rows * chunks + slots - 1) / slots, max_blocks(device));
  reduce_rows_kernel<G, VEC><<<unsigned(std::max<int64_t>(blocks, 1)), kBlockSize, 0, stream>>>(
      x, rows, len, row_stride, elem_stride, chunks, chunk_len, fold, sink);
  LOOM_CUDA_KERNEL_CHECK();
}

// Folds x, read as g (inner == 1), into sink(row) for every row of g.outer.
template <typename In, typename Fold, typename Sink>
void fold_rows(const In* x, const ReduceGeometry& g, const Fold& fold, const Sink& sink, int device,
               cudaStream_t stream) {
  using State = typename Fold::State;
  constexpr int VEC = int(16 / sizeof(In));
  static_assert(VEC > 1, "fold_rows reads elements of at most 8 bytes");
  const bool vectors = g.len_stride == 1 && keeps_vectors(g.outer, g.outer_stride, VEC) && is_aligned16(x);
  if (g.len <= kWarpRowMax) {  // a warp a row, 8 rows a block
    const int64_t len = std::max<int64_t>(g.len, 1);
    if (vectors) launch_rows<kWarpSize, VEC>(x, g.outer, g.len, g.outer_stride, 1, 1, len, fold, sink, device, stream);
    else launch_rows<kWarpSize, 1>(x, g.outer, g.len, g.outer_stride, g.len_stride, 1, len, fold, sink, device, stream);
    return;
  }
  // A block a row; rows too few to fill the GPU are split in chunks of at least
  // kMinRowChunk elements (a multiple of any vector width).
  const int64_t chunks_wanted = std::clamp<int64_t>(max_blocks(device) / std::max<int64_t>(g.outer, 1), 1,
                                                    (g.len + kMinRowChunk - 1) / kMinRowChunk);
  const int64_t chunk_len = ((g.len + chunks_wanted - 1) / chunks_wanted + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  const int64_t chunks = (g.len + chunk_len - 1) / chunk_len;
  auto launch = [&](int64_t n_chunks, const auto& to) {
    if (vectors) launch_rows<kBlockSize, VEC>(x, g.outer, g.len, g.outer_stride, 1, n_chunks, chunk_len, fold, to,
                                              device, stream);
    else launch_rows<kBlockSize, 1>(x, g.outer, g.len, g.outer_stride, g.len_stride, n_chunks, chunk_len, fold, to,
                                    device, stream);
  };
  if (chunks == 1) return launch(1, sink);
  // Two launches: each chunk's State, then each row's chunks in order, a warp a row.
  const Tensor partial = state_buffer<State>(g.outer * chunks, device);
  State* pp = static_cast<State*>(partial.data());
  launch(chunks, PartialSink<State>{pp});
  launch_rows<kWarpSize, 1>(pp, g.outer, chunks, chunks, 1, 1, chunks, fold, sink, device, stream);
}

template <int VEC, typename In, typename Fold, typename Sink>
void launch_columns(const In* x, const ReduceGeometry& g, int64_t chunks, int64_t chunk_len, const Fold& fold,
                    const Sink& sink, int device, cudaStream_t stream) {
  const int64_t tiles = (g.inner + kColumnLanes * VEC - 1) / (kColumnLanes * VEC);
  const int64_t blocks = std::min<int64_t>(g.outer * tiles * chunks, max_blocks(device));
  reduce_columns_kernel<VEC><<<unsigned(std::max<int64_t>(blocks, 1)), dim3(kColumnLanes, kColumnRows), 0, stream>>>(
      x, g, chunks, chunk_len, fold, sink);
  LOOM_CUDA_KERNEL_CHECK();
}

// Folds x, read as g (inner > 1), into sink(o * inner + i) for every output (o, i).
template <typename In, typename Fold, typename Sink>
void fold_columns(const In* x, const ReduceGeometry& g, const Fold& fold, const Sink& sink, int device,
                  cudaStream_t stream) {
  using State = typename Fold::State;
  constexpr int VEC = int(16 / sizeof(In));
  const bool vectors = VEC > 1 && g.inner_stride == 1 && g.inner % VEC == 0 &&
                       keeps_vectors(g.outer, g.outer_stride, VEC) && keeps_vectors(g.len, g.len_stride, VEC) &&
                       is_aligned16(x);
  const int vec = vectors ? VEC : 1;
  const int64_t tiles = (g.inner + kColumnLanes * vec - 1) / (kColumnLanes * vec);
  const ColumnChunks split = column_chunks(g.len, g.outer * tiles, max_blocks(device), kColumnRows);
  const int64_t chunks = split.count, chunk_len = split.len;
  auto first = [&](const auto& first_sink) {
    if (vectors) {
      if constexpr (VEC > 1) launch_columns<VEC>(x, g, chunks, chunk_len, fold, first_sink, device, stream);
    } else {
      launch_columns<1>(x, g, chunks, chunk_len, fold, first_sink, device, stream);
    }
  };
  if (chunks == 1) return first(sink);
  // Two launches: partial States (chunk, o * inner + i), then each column's chunks in order.
  const int64_t outputs = g.outer * g.inner;
  const Tensor partial = state_buffer<State>(outputs * chunks, device);
  State* pp = static_cast<State*>(partial.data());
  first(PartialSink<State>{pp});
  const ReduceGeometry chunk_columns{1, chunks, outputs, 0, outputs, 1};
  launch_columns<1>(pp, chunk_columns, 1, chunks, fold, sink, device, stream);
}

// in as (outer, len, inner) over `dims` (Note [reading reductions in place]): in itself,
// or, for a layout no view describes, a contiguous copy with the kept dims first.
struct Source {
  Tensor x;
  ReduceGeometry g;
};

Source source_of(const Tensor& in, Dims dims) {
  std::sort(dims.begin(), dims.end());
  if (std::optional<ReduceGeometry> g = reduce_geometry(in.sizes(), in.strides(), dims)) return {in, *g};
  Dims order;
  int64_t rows = 1, len = 1;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) order.push_back(d);
    (reduced ? len : rows) *= in.size(d);
  }
  order.insert(order.end(), dims.begin(), dims.end());
  const Tensor permuted = in.detach().permute(order);
  Tensor x = empty(permuted.sizes(), permuted.options());
  copy(x, permuted);
  return {x, ReduceGeometry{rows, len, 1, len, 1, 0}};
}

// Folds src into sink(k) for each output k (row-major over the kept dims).
template <typename In, typename Fold, typename Sink>
void fold(const Source& src, const Fold& fold, const Sink& sink, int device) {
  const cudaStream_t stream = current_stream(device);
  const In* x = static_cast<const In*>(src.x.data());
  if (src.g.inner == 1) fold_rows(x, src.g, fold, sink, device, stream);
  else fold_columns(x, src.g, fold, sink, device, stream);
}

Tensor contiguous_out(const Tensor& out) {
  return out.is_contiguous() ? out : empty(out.sizes(), out.options());
}

// ---- cumsum ----------------------------------------------------------------------------------

// Note [CUDA cumsum]
// Along len of the (outer, len, inner) view (in place, as the reductions): with inner > 1
// one thread per (o, i) column runs down len, adjacent threads reading adjacent columns;
// rows (inner == 1) up to kWarpScanMax elements take a warp each, scanning 32 elements a
// step with shuffles and carrying the total; longer rows take a block, each thread
// scanning a strip of kScanStrip elements in registers, the strips' totals scanned across
// the block, then each strip offset by those before it and the carry of earlier tiles.
constexpr int64_t kWarpScanMax = 1024;
constexpr int kScanStrip = 8;

template <typename M>
__device__ inline M warp_inclusive_scan(M v) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int d = 1; d < kWarpSize; d *= 2) {
    const M n = __shfl_up_sync(kFullWarpMask, v, d);
    if (lane >= d) v += n;
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    cumsum_columns_kernel(T* y, const T* x, ReduceGeometry gx, ReduceGeometry gy) {
  using M = opmath_t<T>;
  const int64_t columns = gx.outer * gx.inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += int64_t(gridDim.x) * blockDim.x) {
    const T* p = x + gx.column_start(c);
    T* q = y + gy.column_start(c);
    M acc = 0;
    for (int64_t r = 0; r < gx.len; ++r) {
      acc += M(p[r * gx.len_stride]);
      q[r * gy.len_stride] = T(acc);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    cumsum_warp_rows_kernel(T* y, const T* x, ReduceGeometry gx, ReduceGeometry gy) {
  using M = opmath_t<T>;
  constexpr int kSlots = kBlockSize / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t row = int64_t(blockIdx.x) * kSlots + threadIdx.x / kWarpSize; row < gx.outer;
       row += int64_t(gridDim.x) * kSlots) {  // the same row for every lane of a warp
    const T* p = x + row * gx.outer_stride;
    T* q = y + row * gy.outer_stride;
    M carry = 0;
    for (int64_t r0 = 0; r0 < gx.len; r0 += kWarpSize) {
      const int64_t r = r0 + lane;
      const M v = warp_inclusive_scan(r < gx.len ? M(p[r * gx.len_stride]) : M(0));
      if (r < gx.len) q[r * gy.len_stride] = T(carry + v);
      carry += __shfl_sync(kFullWarpMask, v, kWarpSize - 1);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    cumsum_block_rows_kernel(T* y, const T* x, ReduceGeometry gx, ReduceGeometry gy) {
  using M = opmath_t<T>;
  constexpr int64_t kTile = int64_t(kBlockSize) * kScanStrip;
  M* slots = warp_slots<M>();
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  for (int64_t row = blockIdx.x; row < gx.outer; row += gridDim.x) {
    const T* p = x + row * gx.outer_stride;
    T* q = y + row * gy.outer_stride;
    M carry = 0;
    for (int64_t t0 = 0; t0 < gx.len; t0 += kTile) {
      const int64_t s0 = t0 + int64_t(threadIdx.x) * kScanStrip;  // this thread's strip
      M strip[kScanStrip];
      M total = 0;
#pragma unroll
      for (int k = 0; k < kScanStrip; ++k) {
        total += s0 + k < gx.len ? M(p[(s0 + k) * gx.len_stride]) : M(0);
        strip[k] = total;
      }
      // The strips' totals scanned across the block: within each warp, then the warps'.
      const M in_warp = warp_inclusive_scan(total);
      const M up = __shfl_up_sync(kFullWarpMask, in_warp, 1);  // every lane shuffles
      const M before_in_warp = lane == 0 ? M(0) : up;
      __syncthreads();  // the previous tile's reads of the slots are done
      if (lane == kWarpSize - 1) slots[warp] = in_warp;
      __syncthreads();
      M before_warp = 0;
      for (int w = 0; w < warp; ++w) before_warp += slots[w];
      const M before = carry + before_warp + before_in_warp;  // everything before this strip
#pragma unroll
      for (int k = 0; k < kScanStrip; ++k)
        if (s0 + k < gx.len) q[(s0 + k) * gy.len_stride] = T(before + strip[k]);
      M tile_total = 0;
      for (int w = 0; w < kBlockSize / kWarpSize; ++w) tile_total += slots[w];
      carry += tile_total;
    }
  }
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const Dims& dims) {
  LOOM_ASSERT(!dims.empty() && out.dtype() == in.dtype(), "reduce: bad arguments");
  if (out.numel() == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const Source src = source_of(in, dims);
  const Tensor o = contiguous_out(out);
  dispatch_all(in.dtype(), "reduce", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      LOOM_ASSERT(false, "reduce: bool input (the caller converts it)");
    } else {
      using M = opmath_t<T>;
      const ValueSink<T, M> sink{static_cast<T*>(o.data()), src.g.len, op == ReduceOp::Mean};
      dispatch_enum(op == ReduceOp::Mean ? ReduceOp::Sum : op, [&]<ReduceOp OP>() {
        if constexpr (OP != ReduceOp::Mean) fold<T>(src, ValueFold<OP, M>{}, sink, device);
      });
    }
  });
  if (!o.is_same(out)) copy(out, o);
}

void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  const char* name = is_max ? "max" : "min";
  LOOM_ASSERT(in.size(dim) > 0 && indices.dtype() == kInt64, name, ": bad arguments");
  if (values.numel() == 0) return;
  ::loom::cuda::DeviceGuard guard(values.device());
  const int device = values.device().index;
  const Source src = source_of(in, {dim});
  const Tensor v = contiguous_out(values), ix = contiguous_out(indices);
  dispatch_all(in.dtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    fold<T>(src, ArgFold<M>{is_max}, ArgSink<T, M>{static_cast<T*>(v.data()), static_cast<int64_t*>(ix.data())},
            device);
  });
  if (!v.is_same(values)) copy(values, v);
  if (!ix.is_same(indices)) copy(indices, ix);
}

void variance(const Tensor& out, const Tensor& in, const Dims& dims, int64_t correction) {
  LOOM_ASSERT(!dims.empty() && out.dtype() == in.dtype(), "var: bad arguments");
  if (out.numel() == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const Source src = source_of(in, dims);
  const Tensor o = contiguous_out(out);
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using M = opmath_t<T>;
    // As the CPU: a divisor <= 0 gives inf (or nan for 0 / 0), and an empty row gives nan.
    const M divisor = M(std::max<int64_t>(src.g.len - correction, 0));
    fold<T>(src, MomentFold<M>{}, VarianceSink<T, M>{static_cast<T*>(o.data()), divisor}, device);
  });
  if (!o.is_same(out)) copy(out, o);
}

void cumsum(const Tensor& out, const Tensor& in, int64_t dim) {
  LOOM_ASSERT(out.dtype() == in.dtype(), "cumsum: bad arguments");
  if (out.numel() == 0) return;
  if (in.dim() == 0) return cumsum(out.detach().unsqueeze(0), in.detach().unsqueeze(0), 0);
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  // Both read in place along dim (Note [CUDA cumsum]); a layout that does not merge is
  // copied to (or written through) a contiguous tensor of the same shape.
  Tensor x = in;
  if (!dim_geometry(in, dim)) {
    x = empty(in.sizes(), in.options());
    copy(x, in);
  }
  const Tensor y = dim_geometry(out, dim) ? out : empty(out.sizes(), out.options());
  const ReduceGeometry gx = *dim_geometry(x, dim), gy = *dim_geometry(y, dim);
  dispatch_numeric(in.dtype(), "cumsum", [&]<typename T>() {
    T* yp = static_cast<T*>(y.data());
    const T* xp = static_cast<const T*>(x.data());
    const int64_t blocks_max = max_blocks(device);
    if (gx.inner > 1) {
      cumsum_columns_kernel<T><<<grid_size(gx.outer * gx.inner, device), kBlockSize, 0, stream>>>(yp, xp, gx, gy);
    } else if (gx.len <= kWarpScanMax) {
      constexpr int64_t slots = kBlockSize / kWarpSize;
      const unsigned blocks = unsigned(std::clamp<int64_t>((gx.outer + slots - 1) / slots, 1, blocks_max));
      cumsum_warp_rows_kernel<T><<<blocks, kBlockSize, 0, stream>>>(yp, xp, gx, gy);
    } else {
      cumsum_block_rows_kernel<T><<<unsigned(std::clamp<int64_t>(gx.outer, 1, blocks_max)), kBlockSize, 0, stream>>>(
          yp, xp, gx, gy);
    }
    LOOM_CUDA_KERNEL_CHECK();
  });
  if (!y.is_same(out)) copy(out, y);
}

void add_reduce_kernels(Backend& b) {
  b.reduce = &reduce;
  b.arg_reduce = &arg_reduce;
  b.variance = &variance;
  b.cumsum = &cumsum;
}

}  // namespace loom::kernels::cuda
