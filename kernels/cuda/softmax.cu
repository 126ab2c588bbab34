// CUDA softmax and log-softmax along one dim, and their backward, with the semantics of
// kernels/cpu/softmax.cpp (opmath arithmetic, the max subtracted before exp).
//
// Note [CUDA softmax layout]
// Every operand is read (and the result written) in place as (outer, len, inner) along
// dim (Note [reading reductions in place], kernels/cuda/reduce_geometry.h):
// - inner == 1 (dim innermost): a row kernel (Note [rows in registers] in
//   kernels/cuda/row_kernels.cuh): a group of lanes or the whole block per row, the row
//   held in registers for the max, the sum of exponentials and the writes;
// - inner > 1 with enough columns to fill the GPU: one thread per (o, i) column walking
//   len three times, adjacent threads on adjacent columns;
// - otherwise (few long columns, or a layout that does not merge): the operands are copied
//   to contiguous rows with dim innermost, and the result is copied back.
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_geometry.h"
#include "kernels/cuda/row_kernels.cuh"

namespace loom::kernels::cuda {
namespace {

// Columns (inner > 1) run one thread each only when there are at least this many.
constexpr int64_t kMinColumns = 2048;

struct MaxNan {  // a NaN wins, as the CPU's max pass lets it through
  template <typename M>
  __device__ M operator()(M a, M b) const { return (b != b || b > a) ? b : a; }
};

// ---- rows (inner == 1) -------------------------------------------------------------------------

template <typename Config, typename T>
__global__ void __launch_bounds__(kBlockSize)
    softmax_rows_kernel(T* y, const T* x, ReduceGeometry gy, ReduceGeometry gx, bool log) {
  using M = opmath_t<T>;
  constexpr M kNegInf = -std::numeric_limits<M>::infinity();
  for_each_row<Config>(gx.outer, [&](int64_t row, bool valid, int lane) {
    const Row<Config, 1, T> r({x + row * gx.outer_stride}, {gx.len_stride}, lane, valid ? gx.len : 0);
    M mx = r.fold(kNegInf, [](M acc, int64_t, M v) { return MaxNan{}(acc, v); });
    mx = row_reduce<Config>(mx, MaxNan{}, kNegInf);
    M sum = r.fold(M(0), [mx](M acc, int64_t, M v) { return acc + exp(v - mx); });
    sum = row_reduce<Config>(sum, Add{}, M(0));
    T* q = y + row * gy.outer_stride;
    if (log) {
      // (x - max) - log(sum) as the CPU, not x - (max + log(sum)): that rounds at max's
      // scale, an error of ulp(max) (3e-5 for logits near 1000 in float32).
      const M log_sum = ::log(sum);
      r.store(q, gy.len_stride, [mx, log_sum](int64_t, M v) { return (v - mx) - log_sum; });
    } else {
      const M scale = M(1) / sum;
      r.store(q, gy.len_stride, [mx, scale](int64_t, M v) { return exp(v - mx) * scale; });
    }
  });
}

// softmax: gx = y * (g - sum(g * y)); log_softmax: gx = g - exp(y) * sum(g).
template <typename Config, typename T>
__global__ void __launch_bounds__(kBlockSize)
    softmax_backward_rows_kernel(T* gx, const T* g, const T* y, ReduceGeometry ggx, ReduceGeometry gg,
                                 ReduceGeometry gy, bool log) {
  using M = opmath_t<T>;
  for_each_row<Config>(gg.outer, [&](int64_t row, bool valid, int lane) {
    const Row<Config, 2, T> r({g + row * gg.outer_stride, y + row * gy.outer_stride}, {gg.len_stride, gy.len_stride},
                              lane, valid ? gg.len : 0);
    M dot = r.fold(M(0), [log](M acc, int64_t, M gi, M yi) { return acc + (log ? gi : gi * yi); });
    dot = row_reduce<Config>(dot, Add{}, M(0));
    r.store(gx + row * ggx.outer_stride, ggx.len_stride,
            [dot, log](int64_t, M gi, M yi) { return log ? gi - exp(yi) * dot : yi * (gi - dot); });
  });
}

// ---- columns (inner > 1) -----------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    softmax_columns_kernel(T* y, const T* x, ReduceGeometry gy, ReduceGeometry gx, bool log) {
  using M = opmath_t<T>;
  const int64_t columns = gx.outer * gx.inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += int64_t(gridDim.x) * blockDim.x) {
    const T* p = x + gx.column_start(c);
    T* q = y + gy.column_start(c);
    M mx = -std::numeric_limits<M>::infinity();
    for (int64_t r = 0; r < gx.len; ++r) mx = MaxNan{}(mx, M(p[r * gx.len_stride]));
    M sum = 0;
    for (int64_t r = 0; r < gx.len; ++r) sum += exp(M(p[r * gx.len_stride]) - mx);
    if (log) {
      const M log_sum = ::log(sum);
      for (int64_t r = 0; r < gx.len; ++r) q[r * gy.len_stride] = T((M(p[r * gx.len_stride]) - mx) - log_sum);
    } else {
      const M scale = M(1) / sum;
      for (int64_t r = 0; r < gx.len; ++r) q[r * gy.len_stride] = T(exp(M(p[r * gx.len_stride]) - mx) * scale);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    softmax_backward_columns_kernel(T* gx, const T* g, const T* y, ReduceGeometry ggx, ReduceGeometry gg,
                                    ReduceGeometry gy, bool log) {
  using M = opmath_t<T>;
  const int64_t columns = gg.outer * gg.inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += int64_t(gridDim.x) * blockDim.x) {
    const T* gp = g + gg.column_start(c);
    const T* yp = y + gy.column_start(c);
    T* out = gx + ggx.column_start(c);
    M dot = 0;
    for (int64_t r = 0; r < gg.len; ++r) {
      const M gi = M(gp[r * gg.len_stride]);
      dot += log ? gi : gi * M(yp[r * gy.len_stride]);
    }
    for (int64_t r = 0; r < gg.len; ++r) {
      const M gi = M(gp[r * gg.len_stride]), yi = M(yp[r * gy.len_stride]);
      out[r * ggx.len_stride] = T(log ? gi - exp(yi) * dot : yi * (gi - dot));
    }
  }
}

// ---- host side -------------------------------------------------------------------------------

// The operands of one call, each read along dim in place where its layout allows.
struct Along {
  Tensor t;          // the operand, or a contiguous copy with dim innermost (`permuted`)
  ReduceGeometry g;  // t read along dim
};

// Whether every operand's geometry exists and the kernel for it applies.
bool in_place_applies(const std::vector<std::optional<ReduceGeometry>>& gs) {
  for (const auto& g : gs)
    if (!g) return false;
  const ReduceGeometry& g = *gs[0];
  return g.inner == 1 || g.outer * g.inner >= kMinColumns;
}

Dims dim_last(int64_t ndim, int64_t dim) {
  Dims order;
  for (int64_t d = 0; d < ndim; ++d)
    if (d != dim) order.push_back(d);
  order.push_back(dim);
  return order;
}

// t as contiguous rows with dim innermost: its view as (rows, len, 1).
Along as_rows(const Tensor& t, int64_t dim) {
  const Tensor permuted = t.detach().permute(dim_last(t.dim(), dim));
  Tensor x = empty(permuted.sizes(), permuted.options());
  copy(x, permuted);
  const int64_t len = t.size(dim), rows = len == 0 ? 0 : t.numel() / len;
  return {x, ReduceGeometry{rows, len, 1, len, 1, 0}};
}

// The output written in place, or a contiguous (rows, len) buffer copied back after.
struct Written {
  Tensor buffer;  // undefined when writing in place
  ReduceGeometry g;
};

Written output_rows(const Tensor& out, int64_t dim, bool in_place) {
  if (in_place) return {Tensor(), *dim_geometry(out, dim)};
  const int64_t len = out.size(dim), rows = len == 0 ? 0 : out.numel() / len;
  const Tensor permuted = out.detach().permute(dim_last(out.dim(), dim));
  return {empty(permuted.sizes(), permuted.options()), ReduceGeometry{rows, len, 1, len, 1, 0}};
}

void copy_back(const Tensor& out, int64_t dim, const Written& w) {
  if (w.buffer.defined()) copy(out.detach().permute(dim_last(out.dim(), dim)), w.buffer);
}

}  // namespace

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  if (in.dim() == 0) return softmax(out.detach().unsqueeze(0), in.detach().unsqueeze(0), 0, log);
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  const bool in_place = in_place_applies({dim_geometry(in, dim), dim_geometry(out, dim)});
  const Along x = in_place ? Along{in, *dim_geometry(in, dim)} : as_rows(in, dim);
  const Written w = output_rows(out, dim, in_place);
  const Tensor& y = w.buffer.defined() ? w.buffer : out;
  dispatch_floating(in.dtype(), "softmax", [&]<typename T>() {
    T* yp = static_cast<T*>(y.data());
    const T* xp = static_cast<const T*>(x.t.data());
    if (x.g.inner > 1) {
      softmax_columns_kernel<T><<<grid_size(x.g.outer * x.g.inner, device), kBlockSize, 0, stream>>>(yp, xp, w.g,
                                                                                                     x.g, log);
    } else {
      dispatch_row_config<T>(x.g.len, rows_vectorize<T>({{xp, x.g}, {yp, w.g}}), [&]<typename Config>() {
        softmax_rows_kernel<Config, T><<<row_blocks<Config>(x.g.outer), kBlockSize, 0, stream>>>(
            yp, xp, w.g, x.g, log);
      });
    }
    LOOM_CUDA_KERNEL_CHECK();
  });
  copy_back(out, dim, w);
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
  const bool in_place =
      in_place_applies({dim_geometry(grad_out, dim), dim_geometry(y_in, dim), dim_geometry(grad_in, dim)});
  const Along g = in_place ? Along{grad_out, *dim_geometry(grad_out, dim)} : as_rows(grad_out, dim);
  const Along y = in_place ? Along{y_in, *dim_geometry(y_in, dim)} : as_rows(y_in, dim);
  const Written w = output_rows(grad_in, dim, in_place);
  const Tensor& gx = w.buffer.defined() ? w.buffer : grad_in;
  dispatch_floating(grad_in.dtype(), "softmax_backward", [&]<typename T>() {
    T* gxp = static_cast<T*>(gx.data());
    const T* gp = static_cast<const T*>(g.t.data());
    const T* yp = static_cast<const T*>(y.t.data());
    if (g.g.inner > 1) {
      softmax_backward_columns_kernel<T><<<grid_size(g.g.outer * g.g.inner, device), kBlockSize, 0, stream>>>(
          gxp, gp, yp, w.g, g.g, y.g, log);
    } else {
      dispatch_row_config<T>(g.g.len, rows_vectorize<T>({{gp, g.g}, {yp, y.g}, {gxp, w.g}}), [&]<typename Config>() {
        softmax_backward_rows_kernel<Config, T><<<row_blocks<Config>(g.g.outer), kBlockSize, 0, stream>>>(
            gxp, gp, yp, w.g, g.g, y.g, log);
      });
    }
    LOOM_CUDA_KERNEL_CHECK();
  });
  copy_back(grad_in, dim, w);
}

void add_softmax_kernels(Backend& b) {
  b.softmax = &softmax;
  b.softmax_backward = &softmax_backward;
}

}  // namespace loom::kernels::cuda
