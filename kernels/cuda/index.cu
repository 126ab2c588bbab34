// CUDA indexing kernels: index_select, index_add, gather, scatter_add, triangle
// (tril/triu) and the index range check, with the semantics of kernels/cpu/index.cpp.
//
// Note [CUDA indexed loops]
// As on the CPU (Note [indexed loops] in kernels/cpu/index.cpp), the iteration space is
// the index's shape; index_select and index_add broadcast their 1-D index over the other
// dims with stride 0. Each element finds its offsets in the index, the "direct" tensor
// (gather's output, scatter's source: same position) and the "indexed" one (at the index's
// value along dim) by peeling its row-major linear index apart, dim by dim.
// scatter_add adds with atomicAdd for float32, float64, int32 and int64 (the floats in order,
// as below, in deterministic mode: kernels/support/scatter_add_rule.h); index_add on
// contiguous tensors (the embedding backward) sorts its index instead and is deterministic
// (Note [sorted index_add] in kernels/cuda/sorted_index_add.cuh). The 16-bit floats have no exact atomic add, so one thread owns one position (all
// coordinates but dim) and walks the index along dim in order, as the CPU does: two
// positions never hit the same output element, so the sums are deterministic and equal
// the CPU's. Out-of-range indices are the caller's check (check_indices, which on a GPU only
// records a failure: Note [deferred device checks] in kernels/support/device_check.h); a kernel that
// meets one skips it (a gather reads zero) rather than touch memory outside the tensor.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/device_check.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sorted_index_add.cuh"
#include "kernels/support/dispatch_by_size.h"
#include "kernels/support/scatter_add_rule.h"

namespace loom::kernels::cuda {
namespace {

// index, direct and indexed strides (elements) over the iteration shape.
struct IndexedGeometry {
  int ndim = 0;
  int dim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t index_strides[kMaxDims] = {};
  int64_t direct_strides[kMaxDims] = {};
  int64_t indexed_strides[kMaxDims] = {};  // the one at dim is applied to the index's value
  int64_t indexed_size = 0;           // the indexed tensor's size along dim

  // Offsets of the element at `linear` (row-major over sizes), the indexed one without dim.
  LOOM_HOST_DEVICE void offsets(int64_t linear, int64_t& idx, int64_t& direct, int64_t& indexed) const {
    idx = direct = indexed = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = linear % sizes[d];
      linear /= sizes[d];
      idx += c * index_strides[d];
      direct += c * direct_strides[d];
      if (d != dim) indexed += c * indexed_strides[d];
    }
  }
};

IndexedGeometry make_geometry(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& direct,
                              const Tensor& indexed, const char* op) {
  LOOM_CHECK(int64_t(shape.size()) <= kMaxDims, ValueError, op, ": CUDA indexing supports at most ", kMaxDims,
             " dims, got ", shape.size());
  IndexedGeometry g;
  g.ndim = int(shape.size());
  g.dim = int(dim);
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = shape[size_t(d)];
    g.index_strides[d] = index.dim() == 0 ? 0 : index.stride(d);
    g.direct_strides[d] = direct.dim() == 0 ? 0 : direct.stride(d);
    g.indexed_strides[d] = indexed.dim() == 0 ? 0 : indexed.stride(d);
  }
  g.indexed_size = indexed.dim() == 0 ? 1 : indexed.size(dim);
  return g;
}

// dst[p] = src[p with dim = index[p]] over the iteration shape (gather, index_select).
template <typename T, typename I>
__global__ void __launch_bounds__(kBlockSize)
    select_kernel(T* dst, const T* src, const I* index, int64_t n, IndexedGeometry g) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t io, d, s;
    g.offsets(i, io, d, s);
    const int64_t k = int64_t(index[io]);
    dst[d] = (k >= 0 && k < g.indexed_size) ? src[s + k * g.indexed_strides[g.dim]] : T(0);
  }
}

template <typename T>
__device__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // two's complement
  } else {
    atomicAdd(p, v);
  }
}

template <typename T>
constexpr bool kHasAtomicAdd = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                               std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// out[p with dim = index[p]] += src[p], one thread per element, atomically.
template <typename T, typename I>
__global__ void __launch_bounds__(kBlockSize)
    scatter_add_atomic_kernel(T* out, const T* src, const I* index, int64_t n, IndexedGeometry g) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t io, s, o;
    g.offsets(i, io, s, o);
    const int64_t k = int64_t(index[io]);
    if (k >= 0 && k < g.indexed_size) atomic_add(out + o + k * g.indexed_strides[g.dim], src[s]);
  }
}

// The same with one thread per position walking dim in order (g.sizes[dim] set to 1, the
// walk's length passed as len).
template <typename T, typename I>
__global__ void __launch_bounds__(kBlockSize)
    scatter_add_ordered_kernel(T* out, const T* src, const I* index, int64_t positions, int64_t len,
                               IndexedGeometry g) {
  using M = opmath_t<T>;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < positions;
       p += int64_t(gridDim.x) * blockDim.x) {
    int64_t io, s, o;
    g.offsets(p, io, s, o);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = int64_t(index[io + j * g.index_strides[g.dim]]);
      if (k < 0 || k >= g.indexed_size) continue;
      T* dst = out + o + k * g.indexed_strides[g.dim];
      *dst = T(M(*dst) + M(src[s + j * g.direct_strides[g.dim]]));
    }
  }
}

// keys[j] = index[j], or `rows` for an out-of-range one (sorted last, then skipped);
// positions[j] = j.
template <typename I>
__global__ void __launch_bounds__(kBlockSize)
    index_keys_kernel(uint64_t* keys, int64_t* positions, const I* index, int64_t stride, int64_t n, int64_t rows) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = int64_t(index[j * stride]);
    keys[j] = uint64_t(k >= 0 && k < rows ? k : rows);
    positions[j] = j;
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    sorted_index_add_kernel(T* out, const T* src, const uint64_t* keys, const int64_t* positions, int64_t threads,
                            SortedIndexAddGeometry g) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < threads; t += int64_t(gridDim.x) * blockDim.x)
    sorted_index_add_at(t, out, src, keys, positions, g);
}

// Keeps col - row <= k (lower) or >= k (upper) of the last two dims, zeroes the rest.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    triangle_kernel(T* out, const T* in, int64_t n, IndexedGeometry g, int64_t k, bool lower) {
  const int64_t rows = g.sizes[g.ndim - 2], cols = g.sizes[g.ndim - 1];
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t unused, o, x;
    g.offsets(i, unused, o, x);
    const int64_t c = i % cols, r = (i / cols) % rows;
    const bool keep = lower ? c - r <= k : c - r >= k;
    out[o] = keep ? in[x] : T(0);
  }
}

// The deferred range check (Note [deferred device checks]): each thread stops at its first
// element outside [site.low, site.bound) (its smallest position: a thread's positions grow); the
// block's first bad element is reported, by the one thread that found it. A block with none
// returns after one barrier.
template <typename I>
__global__ void __launch_bounds__(kBlockSize)
    check_indices_kernel(DeviceCheckTarget target, DeviceCheckSite site, const I* index, int64_t n,
                         IndexedGeometry g) {
  constexpr unsigned long long kNone = ~0ull;
  unsigned long long first = kNone;
  int64_t value = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t io, unused1, unused2;
    g.offsets(i, io, unused1, unused2);
    const int64_t k = int64_t(index[io]);
    if (k < site.low || k >= site.bound) {
      first = static_cast<unsigned long long>(i);
      value = k;
      break;
    }
  }
  if (!__syncthreads_or(first != kNone)) return;
  __shared__ unsigned long long block_first;
  if (threadIdx.x == 0) block_first = kNone;
  __syncthreads();
  if (first != kNone) atomicMin(&block_first, first);
  __syncthreads();
  if (first != kNone && first == block_first) report_device_check_failure(target, site, int64_t(first), value);
}

// ---- host side -------------------------------------------------------------------------------

// A 0-D or 1-D index viewed with `shape`: stride 0 everywhere but `dim`.
Tensor broadcast_index(const Tensor& index, const Shape& shape, int64_t dim) {
  Shape strides(shape.size(), 0);
  strides[size_t(dim)] = index.dim() == 0 ? 0 : index.stride(0);
  return alias_with(index, shape, strides, index.storage_offset());
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data());
}

// dst[p] = src[p with dim = index[p]] over index's shape.
void select_indexed(const char* op, const Tensor& dst, const Tensor& src, int64_t dim, const Tensor& index) {
  const int64_t n = index.numel();
  if (n == 0) return;
  ::loom::cuda::DeviceGuard guard(dst.device());
  const int device = dst.device().index;
  const IndexedGeometry g = make_geometry(index.sizes(), dim, index, dst, src, op);
  dispatch_by_size(src.dtype(), [&]<typename T>() {
    dispatch_index(index.dtype(), op, [&]<typename I>() {
      select_kernel<T, I><<<grid_size(n, device), kBlockSize, 0, current_stream(device)>>>(
          ptr<T>(dst), ptr<const T>(src), ptr<const I>(index), n, g);
      LOOM_CUDA_KERNEL_CHECK();
    });
  });
}

// out[p with dim = index[p]] += src[p] over index's shape (Note [CUDA indexed loops]).
void add_indexed(const char* op, const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n = index.numel();
  if (n == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  IndexedGeometry g = make_geometry(index.sizes(), dim, index, src, out, op);
  dispatch_numeric(out.dtype(), op, [&]<typename T>() {
    dispatch_index(index.dtype(), op, [&]<typename I>() {
      bool atomic = false;
      if constexpr (kHasAtomicAdd<T>) atomic = !scatter_add_in_order(out.dtype());
      if (atomic) {
        if constexpr (kHasAtomicAdd<T>)
          scatter_add_atomic_kernel<T, I><<<grid_size(n, device), kBlockSize, 0, stream>>>(
              ptr<T>(out), ptr<const T>(src), ptr<const I>(index), n, g);
      } else {
        const int64_t len = index.dim() == 0 ? 1 : index.size(dim);
        const int64_t positions = n / len;
        if (index.dim() > 0) g.sizes[dim] = 1;
        scatter_add_ordered_kernel<T, I><<<grid_size(positions, device), kBlockSize, 0, stream>>>(
            ptr<T>(out), ptr<const T>(src), ptr<const I>(index), positions, len, g);
      }
      LOOM_CUDA_KERNEL_CHECK();
    });
  });
}

// Whether src is out's shape but with index.numel() along dim: the (outer, n, inner)
// geometry sorted_index_add reads it with.
bool fits_sorted_geometry(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  if (src.dim() != out.dim() || src.size(dim) != index.numel()) return false;
  for (int64_t d = 0; d < out.dim(); ++d)
    if (d != dim && src.size(d) != out.size(d)) return false;
  return true;
}

// index_add on contiguous out and src with a 1-D index: sort, then one writer per output
// element (Note [sorted index_add]).
void sorted_index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n = index.numel();
  if (n == 0 || out.numel() == 0) return;
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  const cudaStream_t stream = current_stream(device);
  SortedIndexAddGeometry g{1, out.size(dim), 1, n};
  for (int64_t d = 0; d < dim; ++d) g.outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) g.inner *= out.size(d);
  const TensorOptions on_device = TensorOptions(kInt64).device(out.device());
  Tensor keys = empty({n}, on_device), positions = empty({n}, on_device);
  Tensor sorted_keys = empty({n}, on_device), sorted_positions = empty({n}, on_device);
  auto* k_in = reinterpret_cast<uint64_t*>(keys.data());
  auto* k_out = reinterpret_cast<uint64_t*>(sorted_keys.data());
  dispatch_index(index.dtype(), "index_add", [&]<typename I>() {
    index_keys_kernel<I><<<grid_size(n, device), kBlockSize, 0, stream>>>(
        k_in, ptr<int64_t>(positions), ptr<const I>(index), index.dim() == 0 ? 0 : index.stride(0), n, g.rows);
    LOOM_CUDA_KERNEL_CHECK();
  });
  // Only the bits the keys (at most `rows`) use.
  int end_bit = 1;
  while (end_bit < 64 && (uint64_t(1) << end_bit) <= uint64_t(g.rows)) ++end_bit;
  size_t temp_bytes = 0;
  LOOM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, ptr<int64_t>(positions),
                                                  ptr<int64_t>(sorted_positions), n, 0, end_bit, stream));
  Tensor temp = empty({int64_t(temp_bytes / 8 + 1)}, on_device);
  LOOM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, k_in, k_out, ptr<int64_t>(positions),
                                                  ptr<int64_t>(sorted_positions), n, 0, end_bit, stream));
  const int64_t threads = g.outer * n * g.inner;
  dispatch_floating(out.dtype(), "index_add", [&]<typename T>() {
    sorted_index_add_kernel<T><<<grid_size(threads, device), kBlockSize, 0, stream>>>(
        ptr<T>(out), ptr<const T>(src), k_out, ptr<const int64_t>(sorted_positions), threads, g);
    LOOM_CUDA_KERNEL_CHECK();
  });
}

}  // namespace

void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  select_indexed("index_select", out, in, dim, broadcast_index(index, out.sizes(), dim));
}

void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  select_indexed("gather", out, in, dim, index);
}

void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  if (out.is_floating_point() && out.is_contiguous() && src.is_contiguous() && index.dim() <= 1 &&
      index.numel() <= std::numeric_limits<int32_t>::max() &&  // CUB's item count is an int
      fits_sorted_geometry(out, dim, index, src)) {
    sorted_index_add(out, dim, index, src);
    return;
  }
  add_indexed("index_add", out, dim, broadcast_index(index, src.sizes(), dim), src);
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  add_indexed("scatter_add", out, dim, index, src);
}

void triangle(const Tensor& out, const Tensor& in, int64_t k, bool lower) {
  const char* op = lower ? "tril" : "triu";
  const int64_t n = out.numel();
  if (n == 0) return;
  LOOM_ASSERT(out.dim() >= 2, op, ": expected at least 2 dims");
  ::loom::cuda::DeviceGuard guard(out.device());
  const int device = out.device().index;
  // The index slot is unused: out plays direct and in indexed, with no dim singled out.
  IndexedGeometry g = make_geometry(out.sizes(), 0, out, out, in, op);
  g.dim = -1;
  dispatch_by_size(out.dtype(), [&]<typename T>() {  // zero is all-zero bits in every dtype
    triangle_kernel<T><<<grid_size(n, device), kBlockSize, 0, current_stream(device)>>>(ptr<T>(out),
                                                                                      ptr<const T>(in), n, g, k, lower);
    LOOM_CUDA_KERNEL_CHECK();
  });
}

namespace {

// Queues the deferred check of every element of `index` against `site` (its bound and
// message) on the current stream of index's device: nothing is waited for.
void queue_range_check(const Tensor& index, const DeviceCheckSite& site, const char* op) {
  const int64_t n = index.numel();
  if (n == 0) return;
  ::loom::cuda::DeviceGuard guard(index.device());
  const int device = index.device().index;
  const IndexedGeometry g = make_geometry(index.sizes(), 0, index, index, index, op);
  const DeviceCheckTarget target = device_check_target(device);
  const DeviceCheckSite stamped = stamp_device_check(device, site);
  dispatch_index(index.dtype(), op, [&]<typename I>() {
    check_indices_kernel<I><<<grid_size(n, device), kBlockSize, 0, current_stream(device)>>>(
        target, stamped, ptr<const I>(index), n, g);
    LOOM_CUDA_KERNEL_CHECK();
  });
}

}  // namespace

void check_indices(const Tensor& index, int64_t size, const char* op) {
  queue_range_check(index, make_device_check_site(DeviceCheckKind::kIndexRange, size, op), op);
}

void check_class_targets(const Tensor& target, int64_t classes, const char* op, const std::string& context) {
  queue_range_check(target, make_device_check_site(DeviceCheckKind::kClassTarget, classes, op, context), op);
}

void check_sequence_lengths(const Tensor& lengths, int64_t T, const char* op, const std::string& context) {
  queue_range_check(lengths, make_device_check_site(DeviceCheckKind::kSequenceLength, T + 1, op, context), op);
}

void add_index_kernels(Backend& b) {
  b.index_select = &index_select;
  b.index_add = &index_add;
  b.gather = &gather;
  b.scatter_add = &scatter_add;
  b.triangle = &triangle;
  b.check_indices = &check_indices;
  b.check_class_targets = &check_class_targets;
  b.check_sequence_lengths = &check_sequence_lengths;
}

}  // namespace loom::kernels::cuda
