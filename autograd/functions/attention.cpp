// Fused scaled-dot-product attention: the forward keeps each query row's logsumexp and
// the output, the backward recomputes the weights tile by tile (Note [online softmax] in
// kernels/attention/attention_math.h), so no (L, S) matrix is stored between the two.
#include "autograd/functions/attention.h"

#include <atomic>

#include "autograd/activation_checkpoint.h"
#include "autograd/function.h"
#include "core/factories.h"
#include "core/generator.h"
#include "kernels/attention/attention.h"

namespace loom {

namespace {

// A (B, H, rows, cols) tensor laid out as (B, rows, H, cols): MultiheadAttention's heads
// layout, whose transpose(1, 2) is contiguous.
Tensor empty_heads(const Tensor& like, int64_t rows, int64_t cols, const TensorOptions& options) {
  return empty({like.size(0), rows, like.size(1), cols}, options).transpose(1, 2);
}

std::atomic<uint64_t> fused_attention_forward_runs{0};

}  // namespace

namespace detail {
uint64_t fused_attention_forward_count() { return fused_attention_forward_runs.load(std::memory_order_relaxed); }
}  // namespace detail

Tensor fused_attention_operand(const Tensor& t) {
  if (t.dim() == 4 && kernels::attention_heads_in_place(t)) return t;
  return t.contiguous();
}

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& bias_in,
                       bool causal, double scale, double dropout_p, kernels::SDPBackend backend) {
  LOOM_ASSERT(backend != kernels::SDPBackend::MATH, "fused_attention: MATH is the composition of ops");
  const bool cudnn = backend == kernels::SDPBackend::CUDNN_ATTENTION;
  const auto forward = cudnn ? &kernels::cudnn_attention_forward : &kernels::attention_forward;
  const auto backward = cudnn ? &kernels::cudnn_attention_backward : &kernels::attention_backward;
  // (N, L, E) ... contiguous, or (B, H, L, E) ... read in place (Note [attention head layouts])
  const bool heads = q_in.dim() == 4;
  const Tensor q = fused_attention_operand(q_in.detach()), k = fused_attention_operand(k_in.detach()),
               v = fused_attention_operand(v_in.detach());
  const Tensor bias = bias_in.defined() ? bias_in.detach() : bias_in;
  const int64_t L = q.size(-2), Ev = v.size(-1), N = heads ? q.size(0) * q.size(1) : q.size(0);
  // The bits' stream, reserved here and kept for the backward (Note [attention dropout]);
  // every tier reserves as many counters, so what follows draws the same numbers.
  kernels::AttentionDropout dropout;
  if (dropout_p > 0) {
    Generator& g = default_generator();
    dropout = {dropout_p, g.seed(), g.reserve(kernels::attention_dropout::blocks(N, L, k.size(-2)))};
  }
  Tensor out, lse;  // (N, L, Ev) or (B, H, L, Ev); (N, L)
  if (std::vector<Tensor> kept = detail::checkpoint_kept_attention(); !kept.empty()) {
    out = kept[0];  // a checkpoint's recomputation: the forward's outputs (CheckpointOptions::keep_attention)
    lse = kept[1];
  } else {
    out = heads ? empty_heads(q, L, Ev, q.options()) : empty({N, L, Ev}, q.options());
    lse = empty({N, L}, q.options().dtype(q.dtype() == kFloat64 ? kFloat64 : kFloat32));
    forward(out, lse, q, k, v, bias, causal, scale, dropout);
    fused_attention_forward_runs.fetch_add(1, std::memory_order_relaxed);
    detail::checkpoint_keep_attention({out, lse});
  }
  if (needs_grad(q_in, k_in, v_in)) {
    const char* name = cudnn ? "ScaledDotProductCudnnAttentionBackward" : "ScaledDotProductAttentionBackward";
    record(name, {q_in, k_in, v_in}, {out}, {q, k, v, out.detach(), lse},
           [bias, causal, scale, dropout, heads, backward](BackwardContext& ctx) {
             const std::vector<Tensor>& s = ctx.saved;  // q, k, v, out, lse
             auto like = [heads](const Tensor& t) {
               return heads ? empty_heads(t, t.size(2), t.size(3), t.options()) : empty(t.sizes(), t.options());
             };
             Tensor dq = like(s[0]), dk = like(s[1]), dv = like(s[2]);
             const Tensor dout = fused_attention_operand(ctx.grad());
             backward(dq, dk, dv, dout, s[0], s[1], s[2], s[3], s[4], bias, causal, scale, dropout);
             return std::vector<Tensor>{dq, dk, dv};
           });
  }
  return out;
}

}  // namespace loom
