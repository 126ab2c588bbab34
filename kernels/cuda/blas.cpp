// CUDA batched GEMM (kernels::bmm) through cuBLAS: float32 (TF32 tensor cores only when
// cuda::allow_tf32()), float16 and bfloat16 (multiplied and accumulated in float32, rounded
// once, as on the CPU), float64. Row-major strided tensors map onto cuBLAS's column-major
// GEMM as kernels/cuda/gemm_plan.h explains (Note [row-major tensors in cuBLAS]).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <optional>

#include "core/cuda.h"
#include "core/factories.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/gemm_plan.h"

namespace loom::kernels::cuda {
namespace {

// What cuBLAS recommends for Hopper (CUBLAS_WORKSPACE_CONFIG's default there).
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct CublasState {
  cublasHandle_t handle = nullptr;
  // One per stream: the caching allocator reuses a block only on the stream it was
  // allocated for, so a workspace must not be shared across streams.
  std::map<cudaStream_t, Tensor> workspaces;
};

// This thread's cuBLAS handle for `device` (current), bound to `stream` and its workspace.
// One handle per device and thread, as handles must not be used by two threads at once.
// Handles are never destroyed (as in PyTorch): at process exit the CUDA runtime may be
// gone before a thread_local destructor runs.
cublasHandle_t cublas_handle(Device device, cudaStream_t stream) {
  thread_local std::map<int, CublasState> states;
  CublasState& state = states[device.index];
  if (state.handle == nullptr) {
    LOOM_CUBLAS_CHECK(cublasCreate(&state.handle));
    // Split-K partial sums stay in float32 for 16-bit outputs, as on the CPU.
    LOOM_CUBLAS_CHECK(cublasSetMathMode(
        state.handle, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  }
  auto it = state.workspaces.find(stream);
  if (it == state.workspaces.end()) {
    Tensor workspace = empty({int64_t(kWorkspaceBytes / 8)}, TensorOptions(kInt64).device(device));
    it = state.workspaces.emplace(stream, workspace).first;
  }
  // cublasSetStream resets the workspace to cuBLAS's own, so set ours after it.
  LOOM_CUBLAS_CHECK(cublasSetStream(state.handle, stream));
  LOOM_CUBLAS_CHECK(cublasSetWorkspace(state.handle, it->second.data(), kWorkspaceBytes));
  return state.handle;
}

cudaStream_t current_stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(::loom::cuda::Stream::current(t.device().index).handle());
}

Tensor contiguous_copy(const Tensor& t) {
  Tensor c = empty(t.sizes(), t.options());
  copy(c, t);
  return c;
}

// cuBLAS's name for a (floating-point) dtype.
cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: return CUDA_R_64F;
  }
}

cublasOperation_t op(const GemmOperand& x) { return x.transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Runs a planned GEMM: C = op(first) @ op(second) (+ C when beta = 1).
void run_gemm(const Tensor& out, const GemmPlan& p, double beta) {
  cublasHandle_t handle = cublas_handle(out.device(), current_stream_of(out));
  const GemmOperand &x = p.first, &y = p.second;
  if (out.dtype() == kFloat64) {
    const double alpha = 1.0, beta_d = beta;
    LOOM_CUBLAS_CHECK(cublasDgemmStridedBatched_64(
        handle, op(x), op(y), p.m, p.n, p.k, &alpha, static_cast<const double*>(x.tensor->data()), x.ld,
        x.batch_stride, static_cast<const double*>(y.tensor->data()), y.ld, y.batch_stride, &beta_d,
        static_cast<double*>(out.data()), p.ldc, p.batch_stride_c, p.batch));
    return;
  }
  const float alpha = 1.0f, beta_f = float(beta);
  const cudaDataType_t type = cuda_type(out.dtype());
  const cublasComputeType_t compute = out.dtype() == kFloat32 && ::loom::cuda::allow_tf32()
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  LOOM_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
      handle, op(x), op(y), p.m, p.n, p.k, &alpha, x.tensor->data(), type, x.ld, x.batch_stride, y.tensor->data(),
      type, y.ld, y.batch_stride, &beta_f, out.data(), type, p.ldc, p.batch_stride_c, p.batch, compute,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void bmm(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  LOOM_CHECK(a.device() == out.device() && b.device() == out.device(), DeviceError,
             "bmm: expected tensors on one device, got ", a.device(), " @ ", b.device(), " into ", out.device());
  LOOM_CHECK(a.dim() == 3 && b.dim() == 3 && out.dim() == 3, ShapeError, "bmm: expected 3-D tensors, got ",
             shape_str(a.sizes()), " @ ", shape_str(b.sizes()), " into ", shape_str(out.sizes()));
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  LOOM_CHECK(b.size(0) == batch && b.size(1) == K && out.sizes() == Shape({batch, M, N}), ShapeError,
             "bmm: ", shape_str(a.sizes()), " @ ", shape_str(b.sizes()), " into ", shape_str(out.sizes()),
             ": expected b of shape ", shape_str({batch, K, N}), " and out of shape ", shape_str({batch, M, N}));
  LOOM_CHECK(a.dtype() == b.dtype() && out.dtype() == a.dtype(), DTypeError, "bmm: expected one dtype, got ",
             dtype_name(a.dtype()), " @ ", dtype_name(b.dtype()), " into ", dtype_name(out.dtype()));
  LOOM_CHECK(is_floating_point(a.dtype()), DTypeError, "bmm: expected a floating-point dtype, got ",
             dtype_name(a.dtype()));
  LOOM_CHECK(beta == 0 || beta == 1, ValueError, "bmm: beta must be 0 or 1, got ", beta);
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum
    if (beta == 0) fill(out, 0);
    return;
  }
  ::loom::cuda::DeviceGuard guard(out.device());
  const std::optional<ColumnMajor> ca = column_major(a), cb = column_major(b);
  if (!ca || !cb) {
    const Tensor a2 = ca ? a : contiguous_copy(a), b2 = cb ? b : contiguous_copy(b);
    return bmm(out, a2, b2, beta);
  }
  const std::optional<ColumnMajor> c = writable_column_major(out);
  if (!c) {
    // An output cuBLAS cannot write in place: compute into a contiguous buffer.
    Tensor tmp = beta == 0 ? empty(out.sizes(), out.options()) : contiguous_copy(out);
    bmm(tmp, a, b, beta);
    copy(out, tmp);
    return;
  }
  run_gemm(out, plan_gemm(out, *c, a, *ca, b, *cb), beta);
}

void add_blas_kernels(Backend& b) { b.bmm = &bmm; }

}  // namespace loom::kernels::cuda
