// Fused scaled-dot-product attention: the forward keeps each query row's logsumexp and
// the output, the backward recomputes the weights tile by tile (Note [online softmax] in
// kernels/attention_math.h), so no (L, S) matrix is stored between the two.
#include "autograd/functions/attention.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "core/generator.h"
#include "kernels/attention.h"

namespace loom {

Tensor fused_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& bias_in,
                       bool causal, double scale, double dropout_p) {
  const Tensor q = q_in.detach().contiguous(), k = k_in.detach().contiguous(), v = v_in.detach().contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.detach() : bias_in;
  const int64_t N = q.size(0), L = q.size(1);
  Tensor out = empty({N, L, v.size(2)}, q.options());  // (N, L, Ev)
  Tensor lse = empty({N, L}, q.options().dtype(q.dtype() == kFloat64 ? kFloat64 : kFloat32));  // (N, L)
  // The keep bits' stream, reserved here and kept for the backward (Note [attention dropout]).
  kernels::AttentionDropout dropout;
  if (dropout_p > 0) {
    Generator& g = default_generator();
    dropout = {dropout_p, g.seed(), g.reserve(kernels::attention_dropout::blocks(N, L, k.size(1)))};
  }
  kernels::attention_forward(out, lse, q, k, v, bias, causal, scale, dropout);
  if (needs_grad(q_in, k_in, v_in)) {
    record("ScaledDotProductAttentionBackward", {q_in, k_in, v_in}, {out}, {q, k, v, out.detach(), lse},
           [bias, causal, scale, dropout](BackwardContext& ctx) {
             const std::vector<Tensor>& s = ctx.saved;  // q, k, v, out, lse
             Tensor dq = empty(s[0].sizes(), s[0].options()), dk = empty(s[1].sizes(), s[1].options()),
                    dv = empty(s[2].sizes(), s[2].options());
             kernels::attention_backward(dq, dk, dv, ctx.grad().contiguous(), s[0], s[1], s[2], s[3], s[4], bias,
                                         causal, scale, dropout);
             return std::vector<Tensor>{dq, dk, dv};
           });
  }
  return out;
}

}  // namespace loom
