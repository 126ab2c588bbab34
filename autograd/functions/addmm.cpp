// bmm, baddbmm and addmm, the BLAS-shaped products with PyTorch's names and semantics:
//   bmm(b1, b2)                          (B, M, K) @ (B, K, N) -> (B, M, N), no broadcasting
//   baddbmm(input, b1, b2, beta, alpha)  beta input + alpha (b1 @ b2), input broadcast to (B, M, N)
//   addmm(input, m1, m2, beta, alpha)    beta input + alpha (m1 @ m2), input broadcast to (M, N)
// Each is one kernels::bmm call (addmm's matrices are a batch of one) and one node. With
// beta = 0 the input is not read at all (a NaN or inf in it does not reach the result), as
// in PyTorch; with beta = 1 and alpha = 1 (what ported code mostly passes) the broadcast
// input is written into the result and the GEMM adds the product to it (kernels::bmm's
// beta 1), so a 16-bit result is rounded once, as fused_linear's.
// Under autocast all three run in the lower precision on both devices, as PyTorch lists
// them (Note [autocast policy]).
#include <string>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "core/factories.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

// Whether a tensor of shape `from` expands to `to`: no more dims, each trailing one equal or 1.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t d = 1; d <= from.size(); ++d)
    if (from[from.size() - d] != 1 && from[from.size() - d] != to[to.size() - d]) return false;
  return true;
}

// The checks PyTorch makes, each error naming the op and every operand's shape or dtype.
// `rank` is 3 for bmm and baddbmm, 2 for addmm; input is undefined for bmm.
Shape checked_product_shape(const char* op, const Tensor& input, const Tensor& a, const Tensor& b, int64_t rank) {
  auto operands = [&] {
    return (input.defined() ? shape_str(input.sizes()) + " + " : std::string()) + shape_str(a.sizes()) + " @ " +
           shape_str(b.sizes());
  };
  check_same_device(op, {&input, &a, &b});
  LOOM_CHECK(a.dim() == rank && b.dim() == rank, ShapeError, op, ": ", operands(), ": expected two ", rank,
             "-D tensors");
  for (const Tensor* t : {&input, &a, &b}) {
    if (!t->defined()) continue;
    LOOM_CHECK(t->is_floating_point(), DTypeError, op, ": ", operands(), ": got an operand of dtype ",
               dtype_name(t->dtype()), "; Loom's products take floating-point dtypes only");
    LOOM_CHECK(t->dtype() == a.dtype(), DTypeError, op, ": ", operands(), ": expected one dtype, got ",
               dtype_name(t->dtype()), " and ", dtype_name(a.dtype()));
  }
  LOOM_CHECK(a.size(-1) == b.size(-2), ShapeError, op, ": ", operands(), ": inner dimensions ", a.size(-1), " and ",
             b.size(-2), " differ");
  LOOM_CHECK(rank == 2 || a.size(0) == b.size(0), ShapeError, op, ": ", operands(), ": batch sizes ", a.size(0),
             " and ", b.size(0), " differ");
  Shape shape(a.sizes().begin(), a.sizes().end() - 1);  // (B, M) or (M)
  shape.push_back(b.size(-1));                           // ... N
  LOOM_CHECK(!input.defined() || broadcasts_to(input.sizes(), shape), ShapeError, op, ": ", operands(),
             ": input of shape ", shape_str(input.sizes()), " does not broadcast to the product's shape ",
             shape_str(shape));
  return shape;
}

// out = beta input + alpha (a @ b), without history; a, b as (B, M, K), (B, K, N) views.
Tensor product_forward(const Tensor& input, const Tensor& a, const Tensor& b, const Shape& shape, double beta,
                       double alpha) {
  NoGradGuard no_grad;  // internal views and in-place scaling: the op records one node
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1), B = a.dim() == 3 ? a.size(0) : 1;
  Tensor out = empty(shape, a.options());
  const Tensor out3 = out.view({B, M, N}), a3 = a.reshape({B, M, K}), b3 = b.reshape({B, K, N});
  if (beta == 0 || input.numel() == 0) {  // the input is not read
    kernels::bmm(out3, a3, b3);
    if (alpha != 1) out.mul_(alpha);
  } else if (alpha == 1) {  // out = beta input, then the GEMM adds the product
    kernels::copy(out, input.detach().expand(shape));
    if (beta != 1) out.mul_(beta);
    kernels::bmm(out3, a3, b3, /*beta=*/1);
  } else {
    Tensor product = empty(shape, a.options());
    kernels::bmm(product.view({B, M, N}), a3, b3);
    kernels::copy(out, input.detach().expand(shape));
    if (beta != 1) out.mul_(beta);
    out.add_(product, alpha);
  }
  return out;
}

// The op: autocast, the checks, the product and its node. input is undefined for bmm.
Tensor product_op(const char* op, const Tensor& input_in, const Tensor& a_in, const Tensor& b_in, int64_t rank,
                  Scalar beta_in, Scalar alpha_in) {
  const std::vector<Tensor> cast = autocast::cast_inputs(op, {input_in, a_in, b_in});  // Note [autocast]
  const Tensor &input = cast[0], &a = cast[1], &b = cast[2];
  const Shape shape = checked_product_shape(op, input, a, b, rank);
  const double beta = beta_in.to_double(), alpha = alpha_in.to_double();
  Tensor out = product_forward(input, a, b, shape, input.defined() ? beta : 0, alpha);
  if (needs_grad(input, a, b)) {
    const Shape input_shape = input.defined() ? input.sizes() : Shape{};
    auto backward = [input_shape, beta, alpha](BackwardContext& ctx) {
      const Tensor &a = ctx.saved[0], &b = ctx.saved[1];
      const Tensor& g = ctx.grad();  // (B, M, N) or (M, N)
      Tensor ginput, ga, gb;
      // d input = beta g, summed over the dims the input was broadcast along (0 for beta 0)
      if (ctx.needs(0)) ginput = sum_to(g * beta, input_shape);
      // dA (.., M, K) = alpha dC (.., M, N) · B^T (.., N, K);  dB (.., K, N) = alpha A^T (.., K, M) · dC
      if (ctx.needs(1)) ga = g.matmul(b.transpose(-1, -2)) * alpha;
      if (ctx.needs(2)) gb = a.transpose(-1, -2).matmul(g) * alpha;
      return std::vector<Tensor>{ginput, ga, gb};
    };
    const char* node = rank == 2 ? "AddmmBackward" : input.defined() ? "BaddbmmBackward" : "BmmBackward";
    record(node, {input, a, b}, {out}, {a, b}, backward);
  }
  return out;
}

}  // namespace

Tensor bmm(const Tensor& batch1, const Tensor& batch2) {
  return product_op("bmm", Tensor(), batch1, batch2, 3, 0, 1);
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta, Scalar alpha) {
  LOOM_CHECK(input.defined(), ValueError, "baddbmm: input must be defined");
  return product_op("baddbmm", input, batch1, batch2, 3, beta, alpha);
}

Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha) {
  LOOM_CHECK(input.defined(), ValueError, "addmm: input must be defined");
  return product_op("addmm", input, mat1, mat2, 2, beta, alpha);
}

Tensor Tensor::bmm(const Tensor& mat2) const { return loom::bmm(*this, mat2); }

Tensor Tensor::baddbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta, Scalar alpha) const {
  return loom::baddbmm(*this, batch1, batch2, beta, alpha);
}

Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha) const {
  return loom::addmm(*this, mat1, mat2, beta, alpha);
}

}  // namespace loom
