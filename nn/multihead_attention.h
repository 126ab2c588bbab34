// nn::MultiheadAttention, as torch.nn.MultiheadAttention: the query, key and value
// projected into num_heads heads, scaled-dot-product attention in each, the heads joined and
// projected out.
//
//   nn::MultiheadAttention attention(nn::MultiheadAttentionOptions(64, 8).batch_first(true));
//   auto [out, weights] = attention(x, x, x);     // self-attention: (N, L, 64), (N, L, L)
//   auto [y, none] = attention(q, kv, kv, padding, /*need_weights=*/false);
//
// Parameters under PyTorch's names, so state dicts load both ways: in_proj_weight
// (3E, E) and in_proj_bias (3E) when key and value have the query's size E; otherwise
// q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim) and in_proj_bias;
// out_proj.weight (E, E) and out_proj.bias (E). No bias with bias(false). Initialised as
// PyTorch does: xavier_uniform_ projections, zero biases, out_proj.weight as a Linear's.
//
// Masks as PyTorch's module takes them (the opposite of scaled_dot_product_attention's
// boolean convention): in key_padding_mask (N, S) and attn_mask (L, S) or (N·H, L, S), a
// boolean true means "may not attend"; a float mask is added to the scores.
#pragma once

#include "nn/linear.h"
#include "nn/module.h"

namespace loom::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
  MultiheadAttentionOptions& dropout(double p) { dropout_ = p; return *this; }
  MultiheadAttentionOptions& bias(bool b) { bias_ = b; return *this; }
  MultiheadAttentionOptions& batch_first(bool b) { batch_first_ = b; return *this; }
  MultiheadAttentionOptions& kdim(int64_t d) { kdim_ = d; return *this; }
  MultiheadAttentionOptions& vdim(int64_t d) { vdim_ = d; return *this; }
  int64_t embed_dim_, num_heads_;
  double dropout_ = 0.0;
  bool bias_ = true;
  bool batch_first_ = false;  // false: (L, N, E), as PyTorch's default
  int64_t kdim_ = 0, vdim_ = 0;  // 0: embed_dim
};

struct MultiheadAttentionOutput {
  Tensor output;   // (L, N, E), (N, L, E) with batch_first, or (L, E) unbatched
  Tensor weights;  // (N, L, S) averaged over heads, (N, H, L, S) per head; undefined
                   // unless need_weights
};

class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);

  // query (L, N, E), key (S, N, kdim), value (S, N, vdim) (batch first with batch_first,
  // or without the batch dim). is_causal is PyTorch's hint that attn_mask is the causal
  // mask: it needs attn_mask, which is then applied as given.
  MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                   const Tensor& attn_mask = Tensor(), bool average_attn_weights = true,
                                   bool is_causal = false);
  void reset_parameters();
  std::string extra_repr() const override;

  MultiheadAttentionOptions options;
  int64_t head_dim;
  Tensor in_proj_weight;                              // (3E, E), when kdim == vdim == E
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // otherwise
  Tensor in_proj_bias;                                // (3E), undefined without bias
  Linear out_proj;

 private:
  bool same_embed_dim() const { return in_proj_weight.defined(); }
};
using MultiheadAttention = ModuleHolder<MultiheadAttentionImpl>;

}  // namespace loom::nn
