// CUDA softmax and log-softmax along one dim, and their backward, with the semantics of
// kernels/cpu/softmax.cpp (opmath arithmetic, the max subtracted before exp).
//
// Note [CUDA softmax layout]
// The input is read as contiguous rows with `dim` innermost (a copy through
// kernels::copy unless dim already is the last dim of a contiguous tensor); the result is
// written in that layout and copied back through the permutation unless it is the output
// itself. Each row takes one fused kernel: a max, a sum of exponentials, and the writes.
// Rows up to kWarpRowMax elements get one warp each (8 rows per block, warp shuffles
// only); longer rows get a whole block (warp shuffles, then shared memory).
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"

namespace loom::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int64_t kWarpRowMax = 1024;

struct Add {
  template <typename M>
  __device__ M operator()(M a, M b) const { return a + b; }
};
struct MaxNan {  // a NaN wins, as the CPU's max pass lets it through
  template <typename M>
  __device__ M operator()(M a, M b) const { return (b != b || b > a) ? b : a; }
};

// The fold of v over the row's threads, returned to all of them: one warp (WarpRow) or
// the whole block (`shared` holds 32 Ms).
template <bool WarpRow, typename M, typename Combine>
__device__ M row_reduce(M v, M identity, Combine combine, M* shared) {
  for (int d = kWarp / 2; d > 0; d /= 2) v = combine(v, __shfl_xor_sync(kFullMask, v, d));
  if constexpr (WarpRow) {
    return v;
  } else {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    __syncthreads();  // shared may still be read by a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : identity;
    for (int d = kWarp / 2; d > 0; d /= 2) v = combine(v, __shfl_xor_sync(kFullMask, v, d));
    return v;
  }
}

// Which row this warp or block starts at, the step to the next, and the thread's lane
// within the row.
template <bool WarpRow>
struct RowWalk {
  int64_t first, step;
  int lane, width;
  __device__ RowWalk() {
    if constexpr (WarpRow) {
      const int warps = blockDim.x / kWarp;
      first = int64_t(blockIdx.x) * warps + threadIdx.x / kWarp;
      step = int64_t(gridDim.x) * warps;
      lane = threadIdx.x % kWarp;
      width = kWarp;
    } else {
      first = blockIdx.x;
      step = gridDim.x;
      lane = threadIdx.x;
      width = blockDim.x;
    }
  }
};

template <bool WarpRow, typename T>
__global__ void __launch_bounds__(kBlockSize)
    softmax_kernel(T* y, const T* x, int64_t rows, int64_t len, bool log) {
  using M = opmath_t<T>;
  __shared__ M shared[kWarp];
  const RowWalk<WarpRow> walk;
  for (int64_t row = walk.first; row < rows; row += walk.step) {
    const T* p = x + row * len;
    T* q = y + row * len;
    M mx = -std::numeric_limits<M>::infinity();
    for (int64_t i = walk.lane; i < len; i += walk.width) mx = MaxNan{}(mx, M(p[i]));
    mx = row_reduce<WarpRow>(mx, -std::numeric_limits<M>::infinity(), MaxNan{}, shared);
    M sum = 0;
    for (int64_t i = walk.lane; i < len; i += walk.width) sum += exp(M(p[i]) - mx);
    sum = row_reduce<WarpRow>(sum, M(0), Add{}, shared);
    if (log) {
      // (x - max) - log(sum) as the CPU, not x - (max + log(sum)): that rounds at max's
      // scale, an error of ulp(max) (3e-5 for logits near 1000 in float32).
      const M log_sum = ::log(sum);
      for (int64_t i = walk.lane; i < len; i += walk.width) q[i] = T((M(p[i]) - mx) - log_sum);
    } else {
      const M scale = M(1) / sum;
      for (int64_t i = walk.lane; i < len; i += walk.width) q[i] = T(exp(M(p[i]) - mx) * scale);
    }
  }
}

// softmax: gx = y * (g - sum(g * y)); log_softmax: gx = g - exp(y) * sum(g).
template <bool WarpRow, typename T>
__global__ void __launch_bounds__(kBlockSize)
    softmax_backward_kernel(T* gx, const T* g, const T* y, int64_t rows, int64_t len, bool log) {
  using M = opmath_t<T>;
  __shared__ M shared[kWarp];
  const RowWalk<WarpRow> walk;
  for (int64_t row = walk.first; row < rows; row += walk.step) {
    const T* gp = g + row * len;
    const T* yp = y + row * len;
    T* out = gx + row * len;
    M dot = 0;
    for (int64_t i = walk.lane; i < len; i += walk.width) dot += log ? M(gp[i]) : M(gp[i]) * M(yp[i]);
    dot = row_reduce<WarpRow>(dot, M(0), Add{}, shared);
    for (int64_t i = walk.lane; i < len; i += walk.width) {
      const M gi = M(gp[i]), yi = M(yp[i]);
      out[i] = T(log ? gi - exp(yi) * dot : yi * (gi - dot));
    }
  }
}

// ---- host side -------------------------------------------------------------------------------

// t as contiguous rows with dim innermost (Note [CUDA softmax layout]).
Tensor rows_along(const Tensor& t, const Dims& order) {
  if (order.back() == t.dim() - 1 && t.is_contiguous()) return t;
  const Tensor permuted = t.detach().permute(order);
  Tensor x = empty(permuted.sizes(), permuted.options());
  copy(x, permuted);
  return x;
}

Dims dim_last(int64_t ndim, int64_t dim) {
  Dims order;
  for (int64_t d = 0; d < ndim; ++d)
    if (d != dim) order.push_back(d);
  order.push_back(dim);
  return order;
}

// Launches kernel<WarpRow> over `rows` rows of `len` with a grid that fits.
template <typename LaunchWarp, typename LaunchBlock>
void launch_rows(int64_t rows, int64_t len, int device, LaunchWarp warp_rows, LaunchBlock block_rows) {
  const int64_t max_blocks = grid_size(std::numeric_limits<int32_t>::max(), device);
  if (len <= kWarpRowMax) {
    const int64_t per_block = kBlockSize / kWarp;
    warp_rows(unsigned(std::min<int64_t>((rows + per_block - 1) / per_block, max_blocks)));
  } else {
    block_rows(unsigned(std::min<int64_t>(rows, max_blocks)));
  }
  LOOM_CUDA_KERNEL_CHECK();
}

}  // namespace

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  if (in.dim() == 0) return softmax(out.detach().unsqueeze(0), in.detach().unsqueeze(0), 0, log);
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  const Dims order = dim_last(in.dim(), dim);
  const Tensor x = rows_along(in, order);
  const Tensor permuted_out = out.detach().permute(order);
  const Tensor y = permuted_out.is_contiguous() ? permuted_out : empty(x.sizes(), x.options());
  const int64_t len = in.size(dim), rows = in.numel() / len;
  dispatch_floating(in.dtype(), "softmax", [&]<typename T>() {
    T* yp = static_cast<T*>(y.data());
    const T* xp = static_cast<const T*>(x.data());
    launch_rows(
        rows, len, device,
        [&](unsigned blocks) { softmax_kernel<true, T><<<blocks, kBlockSize, 0, stream>>>(yp, xp, rows, len, log); },
        [&](unsigned blocks) { softmax_kernel<false, T><<<blocks, kBlockSize, 0, stream>>>(yp, xp, rows, len, log); });
  });
  if (!y.is_same(permuted_out)) copy(permuted_out, y);
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& y_in, int64_t dim, bool log) {
  if (grad_in.numel() == 0) return;
  if (grad_in.dim() == 0) {
    return softmax_backward(grad_in.detach().unsqueeze(0), grad_out.detach().unsqueeze(0),
                            y_in.detach().unsqueeze(0), 0, log);
  }
  ::loom::cuda::DeviceGuard guard(grad_in.device());
  const int device = grad_in.device().index;
  const cudaStream_t stream = current_stream(device);
  const Dims order = dim_last(grad_in.dim(), dim);
  const Tensor g = rows_along(grad_out, order), y = rows_along(y_in, order);
  const Tensor permuted_gx = grad_in.detach().permute(order);
  const Tensor gx = permuted_gx.is_contiguous() ? permuted_gx : empty(g.sizes(), g.options());
  const int64_t len = grad_in.size(dim), rows = grad_in.numel() / len;
  dispatch_floating(grad_in.dtype(), "softmax_backward", [&]<typename T>() {
    T* gxp = static_cast<T*>(gx.data());
    const T* gp = static_cast<const T*>(g.data());
    const T* yp = static_cast<const T*>(y.data());
    launch_rows(
        rows, len, device,
        [&](unsigned blocks) {
          softmax_backward_kernel<true, T><<<blocks, kBlockSize, 0, stream>>>(gxp, gp, yp, rows, len, log);
        },
        [&](unsigned blocks) {
          softmax_backward_kernel<false, T><<<blocks, kBlockSize, 0, stream>>>(gxp, gp, yp, rows, len, log);
        });
  });
  if (!gx.is_same(permuted_gx)) copy(permuted_gx, gx);
}

void add_softmax_kernels(Backend& b) {
  b.softmax = &softmax;
  b.softmax_backward = &softmax_backward;
}

}  // namespace loom::kernels::cuda
