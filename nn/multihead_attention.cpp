#include "nn/multihead_attention.h"

#include <cmath>
#include <limits>

#include "core/factories.h"
#include "autograd/grad_mode.h"
#include "core/ops.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {
namespace {

constexpr const char* kWho = "MultiheadAttention";

// A PyTorch-convention mask (bool: true = may not attend; float: added) as an additive
// float mask of `dtype`.
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() == kBool)
    return zeros(mask.sizes(), TensorOptions(dtype).device(mask.device()))
        .masked_fill(mask, -std::numeric_limits<double>::infinity());
  LOOM_CHECK(is_floating_point(mask.dtype()), DTypeError, kWho, ": a mask must be bool or floating point, got ",
             dtype_name(mask.dtype()));
  return mask.to(dtype);
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& o)
    : Module("MultiheadAttention"), options(o) {
  const int64_t e = o.embed_dim_;
  LOOM_CHECK(e > 0 && o.num_heads_ > 0, ValueError, kWho, ": embed_dim and num_heads must be positive, got ", e,
             " and ", o.num_heads_);
  LOOM_CHECK(e % o.num_heads_ == 0, ValueError, kWho, ": embed_dim ", e, " must be divisible by num_heads ",
             o.num_heads_);
  LOOM_CHECK(o.dropout_ >= 0 && o.dropout_ < 1, ValueError, kWho, ": dropout must be in [0, 1), got ", o.dropout_);
  LOOM_CHECK(o.kdim_ >= 0 && o.vdim_ >= 0, ValueError, kWho, ": kdim and vdim must be positive, got ", o.kdim_,
             " and ", o.vdim_);
  options.kdim_ = o.kdim_ ? o.kdim_ : e;
  options.vdim_ = o.vdim_ ? o.vdim_ : e;
  head_dim = e / o.num_heads_;
  if (options.kdim_ == e && options.vdim_ == e) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", empty({e, options.kdim_}));
    v_proj_weight = register_parameter("v_proj_weight", empty({e, options.vdim_}));
  }
  if (o.bias_) in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  out_proj = register_module("out_proj", Linear(LinearOptions(e, e).bias(o.bias_)));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  // PyTorch's _reset_parameters: xavier_uniform_ over the whole (3E, E) matrix (or each
  // projection), zero biases; out_proj.weight keeps its Linear initialisation.
  if (same_embed_dim()) {
    init::xavier_uniform_(in_proj_weight);
  } else {
    init::xavier_uniform_(q_proj_weight);
    init::xavier_uniform_(k_proj_weight);
    init::xavier_uniform_(v_proj_weight);
  }
  NoGradGuard no_grad;
  if (in_proj_bias.defined()) in_proj_bias.zero_();
  if (out_proj->bias.defined()) out_proj->bias.zero_();
}

MultiheadAttentionOutput MultiheadAttentionImpl::forward(const Tensor& query_in, const Tensor& key_in,
                                                         const Tensor& value_in, const Tensor& key_padding_mask,
                                                         bool need_weights, const Tensor& attn_mask_in,
                                                         bool average_attn_weights, bool is_causal) {
  const int64_t e = options.embed_dim_, h = options.num_heads_;
  const bool batched = query_in.dim() == 3;
  LOOM_CHECK((query_in.dim() == 3 || query_in.dim() == 2) && key_in.dim() == query_in.dim() &&
                 value_in.dim() == query_in.dim(),
             ShapeError, kWho, ": query, key and value must all be 3-D (batched) or 2-D (unbatched), got ",
             shape_str(query_in.sizes()), ", ", shape_str(key_in.sizes()), " and ", shape_str(value_in.sizes()));
  // Everything below is batch first: (N, L, E).
  auto batch_first = [&](const Tensor& x) {
    if (!batched) return x.unsqueeze(0);
    return options.batch_first_ ? x : x.transpose(0, 1);
  };
  const Tensor query = batch_first(query_in), key = batch_first(key_in), value = batch_first(value_in);
  const int64_t n = query.size(0), l = query.size(1), s = key.size(1);
  LOOM_CHECK(query.size(2) == e && key.size(2) == options.kdim_ && value.size(2) == options.vdim_ &&
                 key.size(0) == n && value.size(0) == n && value.size(1) == s,
             ShapeError, kWho, ": expected query (..., ", e, "), key (..., ", options.kdim_, ") and value (..., ",
             options.vdim_, ") with the same batch and key/value length, got ", shape_str(query_in.sizes()), ", ",
             shape_str(key_in.sizes()), " and ", shape_str(value_in.sizes()),
             options.batch_first_ ? " (batch first)" : " (sequence first)");
  LOOM_CHECK(!is_causal || attn_mask_in.defined(), ValueError, kWho,
             ": is_causal is a hint that attn_mask is the causal mask; pass that mask too "
             "(nn::generate_square_subsequent_mask)");

  // Projections: (N, L, E), (N, S, E), (N, S, E).
  auto part = [&](const Tensor& t, int64_t i) { return t.defined() ? t.narrow(0, i * e, e) : Tensor(); };
  const Tensor wq = same_embed_dim() ? part(in_proj_weight, 0) : q_proj_weight;
  const Tensor wk = same_embed_dim() ? part(in_proj_weight, 1) : k_proj_weight;
  const Tensor wv = same_embed_dim() ? part(in_proj_weight, 2) : v_proj_weight;
  auto heads = [&](const Tensor& x, int64_t len) { return x.reshape({n, len, h, head_dim}).transpose(1, 2); };
  const Tensor q = heads(functional::linear(query, wq, part(in_proj_bias, 0)), l);  // (N, H, L, hd)
  const Tensor k = heads(functional::linear(key, wk, part(in_proj_bias, 1)), s);    // (N, H, S, hd)
  const Tensor v = heads(functional::linear(value, wv, part(in_proj_bias, 2)), s);  // (N, H, S, hd)

  // One additive mask broadcasting to (N, H, L, S).
  Tensor mask;
  if (attn_mask_in.defined()) {
    const bool shared = attn_mask_in.dim() == 2 && attn_mask_in.size(0) == l && attn_mask_in.size(1) == s;
    const bool per_head = attn_mask_in.dim() == 3 && attn_mask_in.size(0) == n * h && attn_mask_in.size(1) == l &&
                          attn_mask_in.size(2) == s;
    LOOM_CHECK(shared || per_head, ShapeError, kWho, ": attn_mask must be (L, S) = (", l, ", ", s,
               ") or (N*num_heads, L, S) = (", n * h, ", ", l, ", ", s, "), got ", shape_str(attn_mask_in.sizes()));
    mask = additive(attn_mask_in, q.dtype());
    mask = shared ? mask.reshape({1, 1, l, s}) : mask.reshape({n, h, l, s});
  }
  if (key_padding_mask.defined()) {
    const Tensor kpm = batched ? key_padding_mask : key_padding_mask.unsqueeze(0);
    LOOM_CHECK(kpm.dim() == 2 && kpm.size(0) == n && kpm.size(1) == s, ShapeError, kWho,
               ": key_padding_mask must be (N, S) = (", n, ", ", s, ")", batched ? "" : " or (S) unbatched", ", got ",
               shape_str(key_padding_mask.sizes()));
    const Tensor padding = additive(kpm, q.dtype()).reshape({n, 1, 1, s});
    mask = mask.defined() ? mask + padding : padding;
  }
  const double p = is_training() ? options.dropout_ : 0.0;

  Tensor attended, weights;  // (N, H, L, hd), (N, H, L, S)
  if (need_weights) {
    // The weights are returned, so they are computed: as PyTorch's need_weights path.
    Tensor scores = (q * (1.0 / std::sqrt(double(head_dim)))).matmul(k.transpose(-2, -1));  // (N, H, L, S)
    if (mask.defined()) scores = scores + mask;
    weights = dropout(softmax(scores, -1), p, p > 0);
    attended = weights.matmul(v);
  } else {
    attended = functional::scaled_dot_product_attention(q, k, v, mask, p);
  }
  Tensor out = out_proj(attended.transpose(1, 2).reshape({n, l, e}));  // (N, L, E)
  if (!batched) {
    out = out.squeeze(0);
  } else if (!options.batch_first_) {
    out = out.transpose(0, 1);
  }
  if (weights.defined()) {
    if (average_attn_weights) weights = weights.mean(1);  // (N, L, S)
    if (!batched) weights = weights.squeeze(0);
  }
  return {out, weights};
}

std::string MultiheadAttentionImpl::extra_repr() const {
  return "embed_dim=" + std::to_string(options.embed_dim_) + ", num_heads=" + std::to_string(options.num_heads_) +
         (options.dropout_ > 0 ? ", dropout=" + std::to_string(options.dropout_) : "") +
         (options.batch_first_ ? ", batch_first=True" : "");
}

}  // namespace loom::nn
