// CUDA layer norm over the N elements of each row, forward and backward
// (kernels/norm/layer_norm.h), with the math of the CPU kernel (Note [fused layer norm] in
// kernels/cpu/layer_norm.cpp): opmath arithmetic, the mean first and then the biased
// variance from the squared deviations (no cancellation), rstd = 1 / sqrt(var + eps), and
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),  g = dy weight, xhat = (x - mean) rstd.
//
// Note [CUDA layer norm]
// - Forward and dx: a row kernel (Note [rows in registers] in kernels/cuda/row_kernels.cuh):
//   the row (x; dy and x for dx) is read into registers once, then the two sums and the
//   writes run on the registers; each row's mean and rstd are written by its first lane.
// - dweight = sum over rows of dy xhat and dbias = sum of dy: a (32, 8) block sums 32
//   adjacent columns over one chunk of rows (its 8 rows of threads taking every 8th row,
//   column_reduce folding them) into per-chunk partial sums (chunks, N) in opmath; a second
//   kernel adds each column's chunks in chunk order and rounds once to the parameter's
//   dtype. The chunks depend only on the shapes, so the result repeats run to run.
// The weight and bias are x's dtype or float32 (for a 16-bit x); both are read through
// ParamPtr, which converts either.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce_geometry.h"
#include "kernels/cuda/row_kernels.cuh"

namespace loom::kernels::cuda {
namespace {

constexpr int kColumnLanes = 32;
constexpr int kColumnRows = kBlockSize / kColumnLanes;

// A weight, bias or one of their gradients (N): of x's dtype X, or float32; null when
// undefined (reads give `fallback`, writes are skipped).
template <typename X>
struct ParamPtr {
  void* p = nullptr;
  bool is_float = false;
  __device__ opmath_t<X> read(int64_t i, opmath_t<X> fallback) const {
    if (p == nullptr) return fallback;
    return is_float ? opmath_t<X>(static_cast<const float*>(p)[i]) : opmath_t<X>(static_cast<const X*>(p)[i]);
  }
  __device__ void write(int64_t i, opmath_t<X> v) const {
    if (p == nullptr) return;
    if (is_float) static_cast<float*>(p)[i] = float(v);
    else static_cast<X*>(p)[i] = X(v);
  }
};

template <typename X>
ParamPtr<X> param(const Tensor& t) {
  if (!t.defined()) return {};
  LOOM_ASSERT(t.dtype() == dtype_of<X> || t.dtype() == kFloat32, "layer_norm: a parameter of dtype ",
              dtype_name(t.dtype()), " beside an input of ", dtype_name(dtype_of<X>));
  return {t.data(), t.dtype() == kFloat32 && dtype_of<X> != kFloat32};
}

// Two sums at once (dx's sum of g and of g xhat).
template <typename M>
struct Sums {
  M a, b;
};
template <typename M>
__device__ inline Sums<M> shfl_xor(Sums<M> s, int lane_mask) {
  using ::loom::kernels::cuda::shfl_xor;
  return {shfl_xor(s.a, lane_mask), shfl_xor(s.b, lane_mask)};
}
struct AddSums {
  template <typename M>
  __device__ Sums<M> operator()(Sums<M> x, Sums<M> y) const { return {x.a + y.a, x.b + y.b}; }
};

// ---- kernels ---------------------------------------------------------------------------------

// y (rows, n) = (x - mean) rstd w + b; mean, rstd (rows) in opmath.
template <typename Config, typename X>
__global__ void __launch_bounds__(kBlockSize)
    layer_norm_forward_kernel(X* y, opmath_t<X>* mean_out, opmath_t<X>* rstd_out, const X* x, ParamPtr<X> w,
                              ParamPtr<X> b, int64_t rows, int64_t n, opmath_t<X> eps) {
  using M = opmath_t<X>;
  for_each_row<Config>(rows, [&](int64_t row, bool valid, int lane) {
    const Row<Config, 1, X> r({x + row * n}, {1}, lane, valid ? n : 0);
    const M sum = row_reduce<Config>(r.fold(M(0), [](M acc, int64_t, M v) { return acc + v; }), Add{}, M(0));
    const M mean = sum / M(n);
    const M squares = row_reduce<Config>(
        r.fold(M(0), [mean](M acc, int64_t, M v) { return acc + (v - mean) * (v - mean); }), Add{}, M(0));
    const M rstd = M(1) / sqrt(squares / M(n) + eps);
    r.store(y + row * n, 1, [&](int64_t i, M v) { return (v - mean) * rstd * w.read(i, M(1)) + b.read(i, M(0)); });
    if (valid && lane == 0) mean_out[row] = mean, rstd_out[row] = rstd;
  });
}

// dx (rows, n) from dy, x, mean, rstd and w.
template <typename Config, typename X>
__global__ void __launch_bounds__(kBlockSize)
    layer_norm_dx_kernel(X* dx, const X* dy, const X* x, const opmath_t<X>* mean_in, const opmath_t<X>* rstd_in,
                         ParamPtr<X> w, int64_t rows, int64_t n) {
  using M = opmath_t<X>;
  for_each_row<Config>(rows, [&](int64_t row, bool valid, int lane) {
    const Row<Config, 2, X> r({dy + row * n, x + row * n}, {1, 1}, lane, valid ? n : 0);
    const M mean = mean_in[row], rstd = rstd_in[row];
    Sums<M> s = r.fold(Sums<M>{M(0), M(0)}, [&](Sums<M> acc, int64_t i, M g, M v) {
      const M gw = g * w.read(i, M(1));
      return Sums<M>{acc.a + gw, acc.b + gw * ((v - mean) * rstd)};
    });
    s = row_reduce<Config>(s, AddSums{}, Sums<M>{M(0), M(0)});
    const M mean_g = s.a / M(n), mean_g_xhat = s.b / M(n);
    r.store(dx + row * n, 1, [&](int64_t i, M g, M v) {
      return rstd * (g * w.read(i, M(1)) - mean_g - ((v - mean) * rstd) * mean_g_xhat);
    });
  });
}

// Partial sums over chunk c's rows [c * chunk_rows, +chunk_rows) of dy xhat (into
// dw_part[c * n + i]) and dy (db_part), for the kColumnLanes columns of a tile; either
// part may be null.
template <typename X>
__global__ void __launch_bounds__(kBlockSize)
    layer_norm_param_partials_kernel(opmath_t<X>* dw_part, opmath_t<X>* db_part, const X* dy, const X* x,
                                     const opmath_t<X>* mean_in, const opmath_t<X>* rstd_in, int64_t rows, int64_t n,
                                     int64_t chunks, int64_t chunk_rows) {
  using M = opmath_t<X>;
  const int64_t tiles = (n + kColumnLanes - 1) / kColumnLanes;
  for (int64_t unit = blockIdx.x; unit < tiles * chunks; unit += gridDim.x) {
    const int64_t chunk = unit % chunks, i = (unit / chunks) * kColumnLanes + threadIdx.x;
    const int64_t begin = chunk * chunk_rows, end = min(rows, begin + chunk_rows);
    Sums<M> acc{M(0), M(0)};
    if (i < n) {
      for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRows) {
        const M g = M(dy[r * n + i]);
        acc.a += g * ((M(x[r * n + i]) - mean_in[r]) * rstd_in[r]);
        acc.b += g;
      }
    }
    const Sums<M> s = column_reduce<kBlockSize>(acc, AddSums{});
    if (threadIdx.y == 0 && i < n) {
      if (dw_part) dw_part[chunk * n + i] = s.a;
      if (db_part) db_part[chunk * n + i] = s.b;
    }
  }
}

// dweight[i], dbias[i] = the chunks' partial sums of column i, added in chunk order.
template <typename X>
__global__ void __launch_bounds__(kBlockSize)
    layer_norm_param_finish_kernel(ParamPtr<X> dw, ParamPtr<X> db, const opmath_t<X>* dw_part,
                                   const opmath_t<X>* db_part, int64_t n, int64_t chunks) {
  using M = opmath_t<X>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    M sw = 0, sb = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      if (dw_part) sw += dw_part[c * n + i];
      if (db_part) sb += db_part[c * n + i];
    }
    dw.write(i, sw);
    db.write(i, sb);
  }
}

// ---- host side -------------------------------------------------------------------------------

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t rows = x.size(0), n = x.size(1);
  if (rows == 0) return;
  ::loom::cuda::DeviceGuard guard(x.device());
  const int device = x.device().index;
  const cudaStream_t stream = current_stream(device);
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename X>() {
    using M = opmath_t<X>;
    LOOM_ASSERT(mean.dtype() == dtype_of<M> && rstd.dtype() == dtype_of<M>, "layer_norm: mean and rstd must be ",
                dtype_name(dtype_of<M>));
    X* yp = static_cast<X*>(y.data());
    const X* xp = static_cast<const X*>(x.data());
    const ReduceGeometry rows_n = contiguous_rows(rows, n);
    dispatch_row_config<X>(n, rows_vectorize<X>({{xp, rows_n}, {yp, rows_n}}), [&]<typename Config>() {
      layer_norm_forward_kernel<Config, X><<<row_blocks<Config>(rows), kBlockSize, 0, stream>>>(
          yp, static_cast<M*>(mean.data()), static_cast<M*>(rstd.data()), xp, param<X>(weight), param<X>(bias), rows,
          n, M(eps));
    });
    LOOM_CUDA_KERNEL_CHECK();
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const int64_t rows = x.size(0), n = x.size(1);
  ::loom::cuda::DeviceGuard guard(x.device());
  const int device = x.device().index;
  const cudaStream_t stream = current_stream(device);
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<typename X>() {
    using M = opmath_t<X>;
    const X* dyp = static_cast<const X*>(dy.data());
    const X* xp = static_cast<const X*>(x.data());
    const M* mp = static_cast<const M*>(mean.data());
    const M* rp = static_cast<const M*>(rstd.data());
    if (dx.defined() && rows > 0) {
      X* dxp = static_cast<X*>(dx.data());
      const ReduceGeometry rows_n = contiguous_rows(rows, n);
      dispatch_row_config<X>(n, rows_vectorize<X>({{dyp, rows_n}, {xp, rows_n}, {dxp, rows_n}}), [&]<typename Config>() {
        layer_norm_dx_kernel<Config, X><<<row_blocks<Config>(rows), kBlockSize, 0, stream>>>(
            dxp, dyp, xp, mp, rp, param<X>(weight), rows, n);
      });
      LOOM_CUDA_KERNEL_CHECK();
    }
    if (!dweight.defined() && !dbias.defined()) return;
    // Chunks of rows while the column tiles cannot fill the GPU (as reductions split theirs).
    const int64_t tiles = (n + kColumnLanes - 1) / kColumnLanes;
    const int64_t blocks_max = grid_size(std::numeric_limits<int32_t>::max(), device);
    const ColumnChunks split = column_chunks(rows, tiles, blocks_max, kColumnRows);
    const int64_t chunks = split.count, chunk_rows = split.len;
    const TensorOptions part_options = TensorOptions(dtype_of<M>).device(x.device());
    const Tensor dw_part = dweight.defined() ? empty({chunks, n}, part_options) : Tensor();
    const Tensor db_part = dbias.defined() ? empty({chunks, n}, part_options) : Tensor();
    M* dwp = dw_part.defined() ? static_cast<M*>(dw_part.data()) : nullptr;
    M* dbp = db_part.defined() ? static_cast<M*>(db_part.data()) : nullptr;
    if (n > 0) {
      const unsigned blocks = unsigned(std::clamp<int64_t>(tiles * chunks, 1, blocks_max));
      layer_norm_param_partials_kernel<X><<<blocks, dim3(kColumnLanes, kColumnRows), 0, stream>>>(
          dwp, dbp, dyp, xp, mp, rp, rows, n, chunks, chunk_rows);
      LOOM_CUDA_KERNEL_CHECK();
      layer_norm_param_finish_kernel<X><<<grid_size(n, device), kBlockSize, 0, stream>>>(
          param<X>(dweight), param<X>(dbias), dwp, dbp, n, chunks);
      LOOM_CUDA_KERNEL_CHECK();
    }
  });
}

}  // namespace

void add_layer_norm_kernels(Backend& b) {
  b.layer_norm_forward = &layer_norm_forward;
  b.layer_norm_backward = &layer_norm_backward;
}

}  // namespace loom::kernels::cuda
