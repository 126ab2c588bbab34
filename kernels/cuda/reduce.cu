// CUDA reductions along dims: reduce (sum, mean, max, min, prod), arg_reduce (max/min
// with indices), variance and cumsum, with the semantics of kernels/cpu/reduce.cpp and
// kernels/cpu/arg_reduce.cpp (opmath accumulation, NaN wins, first index on ties).
//
// Note [CUDA reduction layout]
// The input is read as contiguous rows: the kept dims first, the reduced dims last (a
// copy through kernels::copy unless the reduced dims already are the innermost ones of a
// contiguous tensor). One thread block reduces one row: each thread folds a strided
// slice, then warp shuffles and a pass through shared memory combine the 256 partials.
// When there are too few rows to fill the GPU and the rows are long (a full reduction),
// each row is split into chunks reduced by separate blocks into an opmath buffer, and a
// second launch of the same kernel folds the chunks.
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/reduce_math.h"
#include "kernels/functors.h"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// ---- device building blocks ------------------------------------------------------------------

template <typename M>
__device__ M shfl_down(M v, int delta) {
  if constexpr (std::is_same_v<M, bool>) return bool(__shfl_down_sync(kFullMask, int(v), delta));
  else return __shfl_down_sync(kFullMask, v, delta);
}

template <typename M>
__device__ bool is_nan(M v) {
  return v != v;  // false for integers
}

// The block-wide fold of every thread's v, returned to every thread. blockDim.x is a
// multiple of 32; `shared` holds at least 32 Ms.
template <typename M, typename Combine>
__device__ M block_reduce(M v, M identity, Combine combine, M* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int d = kWarp / 2; d > 0; d /= 2) v = combine(v, shfl_down(v, d));
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : identity;
    for (int d = kWarp / 2; d > 0; d /= 2) v = combine(v, shfl_down(v, d));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// ReduceMath (kernels/reduce_math.h, shared with the CPU) with its identity carried as a
// value, so that one kernel serves every op.
template <ReduceOp OP, typename M>
struct Reducer {
  M identity;
  __device__ M operator()(M acc, M x) const { return ReduceMath<OP, M>::combine(acc, x); }
  __device__ M finish(M acc, int64_t n) const { return ReduceMath<OP, M>::finish(acc, n); }
};

// Storage for block_reduce of any opmath type.
template <typename M>
__device__ M* reduce_scratch() {
  __shared__ alignas(16) unsigned char bytes[kWarp * 16];
  return reinterpret_cast<M*>(bytes);
}

// ---- kernels ---------------------------------------------------------------------------------

// Block b folds chunk b % chunks of row b / chunks (chunk_len elements of a row of len)
// into out[b]; with `finish`, the result is finished over `count` elements (a mean's
// division), else it stays a partial opmath value.
template <ReduceOp OP, typename In, typename Out>
__global__ void __launch_bounds__(kBlockSize)
    reduce_rows_kernel(Out* out, const In* x, int64_t rows, int64_t len, int64_t chunks, int64_t chunk_len,
                       bool finish, int64_t count, Reducer<OP, opmath_t<In>> r) {
  using M = opmath_t<In>;
  M* shared = reduce_scratch<M>();
  for (int64_t b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const int64_t row = b / chunks, begin = (b % chunks) * chunk_len;
    const int64_t end = min(len, begin + chunk_len);
    const In* p = x + row * len;
    M acc = r.identity;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = r(acc, M(p[i]));
    acc = block_reduce(acc, r.identity, r, shared);
    if (threadIdx.x == 0) out[b] = Out(finish ? r.finish(acc, count) : acc);
  }
}

// The better of two (value, index) candidates; index < 0 marks "none". A NaN beats any
// number, and among equals (or NaNs) the lower index wins, as the CPU's in-order scan.
template <typename M>
struct ArgBetter {
  bool is_max;
  __device__ bool operator()(M av, int64_t ai, M bv, int64_t bi) const {
    if (bi < 0) return false;
    if (ai < 0) return true;
    const bool an = is_nan(av), bn = is_nan(bv);
    if (an || bn) return an && bn ? bi < ai : bn;
    if (bv == av) return bi < ai;
    return is_max ? bv > av : bv < av;
  }
};

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    arg_reduce_kernel(T* values, int64_t* indices, const T* x, int64_t rows, int64_t len, bool is_max) {
  using M = opmath_t<T>;
  __shared__ M shared_v[kWarp];
  __shared__ int64_t shared_i[kWarp];
  const ArgBetter<M> better{is_max};
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * len;
    M v = M(0);
    int64_t at = -1;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const M xi = M(p[i]);
      if (better(v, at, xi, i)) v = xi, at = i;
    }
    auto warp_fold = [&]() {
      for (int d = kWarp / 2; d > 0; d /= 2) {
        const M ov = shfl_down(v, d);
        const int64_t oi = __shfl_down_sync(kFullMask, (long long)at, d);
        if (better(v, at, ov, oi)) v = ov, at = oi;
      }
    };
    warp_fold();
    __syncthreads();
    if (lane == 0) shared_v[warp] = v, shared_i[warp] = at;
    __syncthreads();
    if (warp == 0) {
      v = lane < warps ? shared_v[lane] : M(0);
      at = lane < warps ? shared_i[lane] : -1;
      warp_fold();
      if (lane == 0) values[row] = T(v), indices[row] = at;
    }
  }
}

// Two passes over each row in opmath: the mean, then the squared deviations.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    variance_kernel(T* out, const T* x, int64_t rows, int64_t len, opmath_t<T> divisor) {
  using M = opmath_t<T>;
  M* shared = reduce_scratch<M>();
  const Reducer<ReduceOp::Sum, M> add{M(0)};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * len;
    M sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) sum += M(p[i]);
    const M mean = block_reduce(sum, M(0), add, shared) / M(len);
    M ss = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const M d = M(p[i]) - mean;
      ss += d * d;
    }
    ss = block_reduce(ss, M(0), add, shared);
    if (threadIdx.x == 0) out[row] = T(ss / divisor);
  }
}

// Inclusive running sum of each row: chunks of blockDim elements, each scanned in shared
// memory (Hillis-Steele) and offset by the carry of the chunks before it.
template <typename T>
__global__ void __launch_bounds__(kBlockSize) cumsum_kernel(T* y, const T* x, int64_t rows, int64_t len) {
  using M = opmath_t<T>;
  __shared__ M scan[kBlockSize];
  const int t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * len;
    T* q = y + row * len;
    M carry = 0;
    for (int64_t c0 = 0; c0 < len; c0 += blockDim.x) {
      const int64_t i = c0 + t;
      __syncthreads();  // the previous chunk's reads of scan are done
      scan[t] = i < len ? M(p[i]) : M(0);
      __syncthreads();
      for (int d = 1; d < int(blockDim.x); d *= 2) {
        const M add = t >= d ? scan[t - d] : M(0);
        __syncthreads();
        scan[t] += add;
        __syncthreads();
      }
      if (i < len) q[i] = T(carry + scan[t]);
      carry += scan[blockDim.x - 1];
    }
  }
}

// ---- host side -------------------------------------------------------------------------------

// in as contiguous (rows, len) with `dims` last (Note [CUDA reduction layout]).
struct Rows {
  Tensor x;
  int64_t rows = 1, len = 1;
  Dims order;  // the permutation of in that x holds
};

Rows rows_of(const Tensor& in, const Dims& dims) {
  Rows r;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) r.order.push_back(d);
    (reduced ? r.len : r.rows) *= in.size(d);
  }
  r.order.insert(r.order.end(), dims.begin(), dims.end());
  bool identity = true;
  for (size_t k = 0; k < r.order.size(); ++k) identity &= r.order[k] == int64_t(k);
  if (identity && in.is_contiguous()) {
    r.x = in;
  } else {
    const Tensor permuted = in.detach().permute(r.order);
    r.x = empty(permuted.sizes(), permuted.options());
    copy(r.x, permuted);
  }
  return r;
}

Tensor contiguous_out(const Tensor& out) {
  return out.is_contiguous() ? out : empty(out.sizes(), out.options());
}

unsigned row_blocks(int64_t rows, int device) {
  return unsigned(std::min<int64_t>(rows, grid_size(std::numeric_limits<int32_t>::max(), device)));
}

template <ReduceOp OP, typename T>
void launch_reduce(const Tensor& o, const Rows& r, int device, cudaStream_t stream) {
  using M = opmath_t<T>;
  const Reducer<OP, M> reducer{ReduceMath<OP, M>::identity()};
  const int64_t max_blocks = grid_size(std::numeric_limits<int32_t>::max(), device);
  constexpr int64_t kMinChunk = 4096;
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(max_blocks / r.rows, (r.len + kMinChunk - 1) / kMinChunk));
  T* out = static_cast<T*>(o.data());
  const T* x = static_cast<const T*>(r.x.data());
  if (chunks == 1) {
    reduce_rows_kernel<OP, T, T><<<row_blocks(r.rows, device), kBlockSize, 0, stream>>>(
        out, x, r.rows, r.len, 1, std::max<int64_t>(r.len, 1), true, r.len, reducer);
    LOOM_CUDA_KERNEL_CHECK();
    return;
  }
  // Two passes: chunk partials in opmath, then one block per row over its partials.
  const int64_t chunk_len = (r.len + chunks - 1) / chunks;
  const Tensor partial = empty({r.rows, chunks}, TensorOptions(dtype_of<M>).device(o.device()));
  M* pp = static_cast<M*>(partial.data());
  reduce_rows_kernel<OP, T, M><<<row_blocks(r.rows * chunks, device), kBlockSize, 0, stream>>>(
      pp, x, r.rows, r.len, chunks, chunk_len, false, r.len, reducer);
  LOOM_CUDA_KERNEL_CHECK();
  const Reducer<OP, opmath_t<M>> fold{reducer.identity};
  reduce_rows_kernel<OP, M, T><<<row_blocks(r.rows, device), kBlockSize, 0, stream>>>(
      out, pp, r.rows, chunks, 1, chunks, true, r.len, fold);
  LOOM_CUDA_KERNEL_CHECK();
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const Dims& dims) {
  LOOM_ASSERT(!dims.empty() && out.dtype() == in.dtype(), "reduce: bad arguments");
  if (out.numel() == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  const Rows r = rows_of(in, dims);
  const Tensor o = contiguous_out(out);
  dispatch_all(in.dtype(), "reduce", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      LOOM_ASSERT(false, "reduce: bool input (the caller converts it)");
    } else {
      dispatch_enum(op, [&]<ReduceOp OP>() {
        launch_reduce<OP, T>(o, r, device, stream);
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
  const Rows r = rows_of(in, {dim});
  const Tensor v = contiguous_out(values), ix = contiguous_out(indices);
  dispatch_all(in.dtype(), name, [&]<typename T>() {
    arg_reduce_kernel<T><<<row_blocks(r.rows, device), kBlockSize, 0, current_stream(device)>>>(
        static_cast<T*>(v.data()), static_cast<int64_t*>(ix.data()), static_cast<const T*>(r.x.data()), r.rows,
        r.len, is_max);
    LOOM_CUDA_KERNEL_CHECK();
  });
  if (!v.is_same(values)) copy(values, v);
  if (!ix.is_same(indices)) copy(indices, ix);
}

void variance(const Tensor& out, const Tensor& in, const Dims& dims, int64_t correction) {
  LOOM_ASSERT(!dims.empty() && out.dtype() == in.dtype(), "var: bad arguments");
  if (out.numel() == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const Rows r = rows_of(in, dims);
  const Tensor o = contiguous_out(out);
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using M = opmath_t<T>;
    // As the CPU: a divisor <= 0 gives inf (or nan for 0 / 0), and an empty row gives nan.
    const M divisor = M(std::max<int64_t>(r.len - correction, 0));
    variance_kernel<T><<<row_blocks(r.rows, device), kBlockSize, 0, current_stream(device)>>>(
        static_cast<T*>(o.data()), static_cast<const T*>(r.x.data()), r.rows, r.len, divisor);
    LOOM_CUDA_KERNEL_CHECK();
  });
  if (!o.is_same(out)) copy(out, o);
}

void cumsum(const Tensor& out, const Tensor& in, int64_t dim) {
  LOOM_ASSERT(out.dtype() == in.dtype(), "cumsum: bad arguments");
  if (out.numel() == 0) return;
  if (in.dim() == 0) return cumsum(out.detach().unsqueeze(0), in.detach().unsqueeze(0), 0);
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const Rows r = rows_of(in, {dim});
  // The result in r.x's layout, copied back through the permutation unless it is out.
  const Tensor permuted_out = out.detach().permute(r.order);
  const Tensor y = permuted_out.is_contiguous() ? permuted_out : empty(r.x.sizes(), r.x.options());
  dispatch_numeric(in.dtype(), "cumsum", [&]<typename T>() {
    cumsum_kernel<T><<<row_blocks(r.rows, device), kBlockSize, 0, current_stream(device)>>>(
        static_cast<T*>(y.data()), static_cast<const T*>(r.x.data()), r.rows, r.len);
    LOOM_CUDA_KERNEL_CHECK();
  });
  if (!y.is_same(permuted_out)) copy(permuted_out, y);
}

void add_reduce_kernels(Backend& b) {
  b.reduce = &reduce;
  b.arg_reduce = &arg_reduce;
  b.variance = &variance;
  b.cumsum = &cumsum;
}

}  // namespace loom::kernels::cuda
