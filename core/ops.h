// Free-function forms of the operators (as torch.xxx), and the ops that take several
// tensors. Each is differentiable where PyTorch's is.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace loom {

Tensor matmul(const Tensor& a, const Tensor& b);  // 1-D, 2-D and batched with broadcasting
// torch.bmm: batch1 (B, M, K) @ batch2 (B, K, N) -> (B, M, N); no broadcasting.
Tensor bmm(const Tensor& batch1, const Tensor& batch2);
// torch.baddbmm: beta * input + alpha * (batch1 @ batch2), input broadcast to (B, M, N).
// beta = 0 does not read input (a NaN in it is not propagated).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1, Scalar alpha = 1);
// torch.addmm: beta * input + alpha * (mat1 (M, K) @ mat2 (K, N)), input broadcast to (M, N).
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, Scalar beta = 1, Scalar alpha = 1);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor softmax(const Tensor& x, int64_t dim);
// torch.sort / argsort / topk (the Tensor methods of the same names).
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
Tensor log_softmax(const Tensor& x, int64_t dim);
// weight (num_embeddings, dim), indices (...) of int64/int32 -> (..., dim).
// Rows at padding_idx (if >= 0) get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);  // int64 output
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training,
// as torch.dropout; the identity otherwise.
Tensor dropout(const Tensor& x, double p, bool training);
// Result shape of broadcasting a and b together; throws ShapeError naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Elementwise closeness, |a - b| <= atol + rtol * |b|, for tests and user code.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace loom
