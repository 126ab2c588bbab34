// matmul with PyTorch's semantics (dot, matrix-vector, matrix-matrix, batched with
// broadcasting) and mm: the forward is one kernels::bmm call, recorded as one node.
//
// Note [matmul shapes]
// A 1-D left operand is a row (1, K) and a 1-D right operand a column (K, 1); that extra
// dim is dropped from the result. All dims but the last two are batch dims and
// broadcast. When the right operand is a matrix, the left one's batch dims are folded
// into its rows: (..., M, K) @ (K, N) is one (rows, K) @ (K, N) GEMM, as in PyTorch (no
// broadcast copy of the matrix, and one large GEMM instead of many small ones).
#include <string>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/checked_shape.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  // Called only when a check fails (LOOM_CHECK evaluates its message lazily).
  auto operands = [&] { return shape_str(a.sizes()) + " @ " + shape_str(b.sizes()); };
  check_same_device(op, {&a, &b});
  LOOM_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError, op, ": ", operands(),
             ": both operands need at least 1 dimension");
  for (const Tensor* t : {&a, &b}) {
    LOOM_CHECK(t->is_floating_point(), DTypeError, op, ": ", operands(), ": got an operand of dtype ",
               dtype_name(t->dtype()), "; Loom's matmul supports floating-point dtypes only (PyTorch "
               "also allows integers on the CPU): convert with .to(kFloat32)");
  }
  LOOM_CHECK(a.dtype() == b.dtype(), DTypeError, op, ": ", operands(), ": expected one dtype, got ",
             dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  LOOM_CHECK(ka == kb, ShapeError, op, ": ", operands(), ": inner dimensions ", ka, " and ", kb, " differ");
}

// The broadcast batch dims of a2 (..., M, K) and b2 (..., K, N).
Shape batch_shape(const Tensor& a2, const Tensor& b2, const Tensor& a, const Tensor& b, const char* op) {
  const Shape batch_a(a2.sizes().begin(), a2.sizes().end() - 2);
  const Shape batch_b(b2.sizes().begin(), b2.sizes().end() - 2);
  try {
    return broadcast_shapes(batch_a, batch_b, op);
  } catch (const ShapeError&) {
    throw ShapeError(detail::str(op, ": ", shape_str(a.sizes()), " @ ", shape_str(b.sizes()),
                                 ": batch dimensions ", shape_str(batch_a), " and ", shape_str(batch_b),
                                 " cannot be broadcast"));
  }
}

// The product, without history (Note [matmul shapes]).
Tensor matmul_forward(const Tensor& a, const Tensor& b, const char* op) {
  NoGradGuard no_grad;  // the views below are internal: the op records one node
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;  // (..., M, K)
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;  // (..., K, N)
  const int64_t M = a2.size(-2), K = a2.size(-1), N = b2.size(-1);
  // The result is allocated in its final shape (not a view: in-place ops on it must work)
  // and viewed as (B, M, N) for the kernel.
  if (b2.dim() == 2) {
    const int64_t rows = leading_numel(a2);
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);  // a's dims but K ...
    if (b.dim() == 2) out_shape.push_back(N);                  // ... and N
    Tensor out = empty(out_shape, a.options());
    kernels::bmm(out.view({1, rows, N}), a2.reshape({1, rows, K}), b2.unsqueeze(0));
    return out;
  }
  const Shape batch = batch_shape(a2, b2, a, b, op);
  const int64_t B = check_numel(batch, op);  // broadcast batch dims can grow the count
  Shape a_shape = batch, b_shape = batch, out_shape = batch;
  a_shape.insert(a_shape.end(), {M, K});
  b_shape.insert(b_shape.end(), {K, N});
  if (a.dim() > 1) out_shape.push_back(M);
  out_shape.push_back(N);  // b has >= 3 dims here
  // Broadcast batch dims have stride 0; reshape copies only if they cannot merge.
  const Tensor a3 = broadcast_to_shape(a2, a_shape, op).reshape({B, M, K});
  const Tensor b3 = broadcast_to_shape(b2, b_shape, op).reshape({B, K, N});
  Tensor out = empty(out_shape, a.options());
  kernels::bmm(out.view({B, M, N}), a3, b3);
  return out;
}

// Gradients w.r.t. a and b (each reduced to its input's shape; undefined if not needed).
std::vector<Tensor> matmul_backward(BackwardContext& ctx) {
  const Tensor& a = ctx.saved[0];
  const Tensor& b = ctx.saved[1];
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;  // (..., M, K)
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;  // (..., K, N)
  Tensor g2 = ctx.grad();                               // out's shape
  if (b.dim() == 1) g2 = g2.unsqueeze(-1);
  if (a.dim() == 1) g2 = g2.unsqueeze(-2);              // (..., M, N)
  Tensor ga, gb;
  if (ctx.needs(0)) {
    // dA (..., M, K) = dC (..., M, N) · B^T (..., N, K), summed over broadcast batch dims
    ga = sum_to(matmul(g2, b2.transpose(-1, -2)), a2.sizes()).reshape(a.sizes());
  }
  if (ctx.needs(1)) {
    if (b2.dim() == 2 && a2.dim() > 2) {
      // b was shared by every batch item: its gradient sums over them, so fold the batch
      // into one GEMM. dB (K, N) = A^T (K, rows) · dC (rows, N)
      const int64_t rows = leading_numel(a2);
      gb = matmul(a2.reshape({rows, a2.size(-1)}).t(), g2.reshape({rows, g2.size(-1)}));
    } else {
      // dB (..., K, N) = A^T (..., K, M) · dC (..., M, N), summed over broadcast batch dims
      gb = sum_to(matmul(a2.transpose(-1, -2), g2), b2.sizes());
    }
    gb = gb.reshape(b.sizes());
  }
  return {ga, gb};
}

Tensor matmul_op(const Tensor& a_in, const Tensor& b_in, const char* op) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  const std::vector<Tensor> cast = autocast::cast_inputs(op, {a_in, b_in});  // Note [autocast]
  const Tensor &a = cast[0], &b = cast[1];
  check_operands(a, b, op);
  Tensor out = matmul_forward(a, b, op);
  if (needs_grad(a, b)) record("MatmulBackward", {a, b}, {out}, {a, b}, matmul_backward);
  if (trace) trace.record({"matmul", {a_in, b_in}, {out}, {}, {}});
  return out;
}

}  // namespace

int64_t leading_numel(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) n *= t.size(d);
  return n;
}

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_op(a, b, "matmul"); }

Tensor Tensor::matmul(const Tensor& other) const { return matmul_op(*this, other, "matmul"); }

Tensor Tensor::mm(const Tensor& other) const {
  LOOM_CHECK(dim() == 2 && other.dim() == 2, ShapeError, "mm: ", shape_str(sizes()), " @ ",
             shape_str(other.sizes()), ": expected two 2-D tensors");
  return matmul_op(*this, other, "mm");
}

}  // namespace loom
