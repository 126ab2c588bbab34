// The two small kernels the cuDNN attention tier runs around cuDNN's graphs
// (kernels/cuda/cudnn_attention_masks.cu; Note [cuDNN attention plans] in
// kernels/attention/cudnn_attention_plan.h). Both launch on the current stream of their tensors'
// device and never wait for the GPU.
#pragma once

#include "core/tensor.h"

namespace loom::kernels::cuda {

// counts (B) int32 = for each batch entry b, one past the last key the key-padding mask
// keeps: 1 + the largest j with bias[b, 0, 0, j] > -inf, 0 when it keeps none. bias is a
// (B, H, L, S) view (or (N, L, S), N = B) of float16 or bfloat16 whose every row of b is
// row (b, 0, 0).
void key_counts(const Tensor& counts, const Tensor& bias);

// Makes rows with every key masked what the other tiers give (Note [online softmax]):
// lse +inf and out 0. A row of n (of N = B·heads) is dead when its lse is not finite, or
// counts is defined and counts[n / heads] is 0. lse (N, L) float32; out (N, L, Ev) or
// (B, H, L, Ev), any row strides.
void zero_dead_rows(const Tensor& out, const Tensor& lse, const Tensor& counts, int64_t heads);

}  // namespace loom::kernels::cuda
