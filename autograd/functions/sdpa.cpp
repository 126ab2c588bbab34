// scaled_dot_product_attention, as torch.nn.functional's (nn::functional names it): the
// argument checks, autocast, and the choice between the fused kernels (attention.cpp beside
// this file, Note [online softmax] in kernels/attention/attention_math.h, with dropout inside:
// Note [attention dropout] in kernels/attention/attention_dropout.h) and the composition of ops they
// are tested against (detail::sdpa_reference, detail::sdpa_dropout_mask).
#include <cmath>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/attention.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "kernels/attention/attention.h"

namespace loom {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

Shape leading(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

Shape with_last_two(Shape batch, int64_t a, int64_t b) {
  batch.push_back(a);
  batch.push_back(b);
  return batch;
}

// The broadcast batch dims of q, k and v, after the checks PyTorch makes; each error names
// the op and the shapes.
Shape checked_batch(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool is_causal,
                    double dropout_p) {
  LOOM_CHECK(q.defined() && k.defined() && v.defined(), ValueError, kOp, ": query, key and value must be defined");
  const std::string shapes = "query " + shape_str(q.sizes()) + ", key " + shape_str(k.sizes()) + ", value " +
                             shape_str(v.sizes());
  LOOM_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ShapeError, kOp,
             ": expected query (..., L, E), key (..., S, E) and value (..., S, Ev) of at least 2 dims, got ", shapes);
  LOOM_CHECK(q.device() == k.device() && q.device() == v.device(), DeviceError, kOp,
             ": expected query, key and value on one device, got ", q.device(), ", ", k.device(), " and ", v.device());
  LOOM_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating_point(q.dtype()), DTypeError, kOp,
             ": expected query, key and value of one floating dtype, got ", dtype_name(q.dtype()), ", ",
             dtype_name(k.dtype()), " and ", dtype_name(v.dtype()));
  LOOM_CHECK(q.size(-1) == k.size(-1), ShapeError, kOp, ": query and key must have the same embedding size E, got ",
             shapes);
  LOOM_CHECK(k.size(-2) == v.size(-2), ShapeError, kOp,
             ": key and value must have the same sequence length S, got ", shapes);
  LOOM_CHECK(dropout_p >= 0 && dropout_p < 1, ValueError, kOp, ": dropout_p must be in [0, 1), got ", dropout_p);
  const Shape batch = broadcast_shapes(broadcast_shapes(leading(q), leading(k), kOp), leading(v), kOp);
  if (mask.defined()) {
    LOOM_CHECK(!is_causal, ValueError, kOp, ": attn_mask must not be given with is_causal = true");
    LOOM_CHECK(mask.device() == q.device(), DeviceError, kOp, ": attn_mask on ", mask.device(), " but query on ",
               q.device());
    LOOM_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(), DTypeError, kOp,
               ": attn_mask must be bool or of the query's dtype ", dtype_name(q.dtype()), ", got ",
               dtype_name(mask.dtype()));
    const Shape scores = with_last_two(batch, q.size(-2), k.size(-2));
    LOOM_CHECK(mask.dim() <= int64_t(scores.size()) && broadcast_shapes(mask.sizes(), scores, kOp) == scores,
               ShapeError, kOp, ": attn_mask of shape ", shape_str(mask.sizes()),
               " does not broadcast to the attention weights' shape ", shape_str(scores), " (", shapes, ")");
  }
  return batch;
}

// A bool mask (true = may attend) as an additive one: 0 where kept, -inf where masked.
Tensor additive_mask(const Tensor& mask, DType dtype) {
  if (!mask.defined() || mask.dtype() != kBool) return mask;
  return zeros(mask.sizes(), TensorOptions(dtype).device(mask.device()))
      .masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

}  // namespace

namespace detail {

Tensor sdpa_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
                      bool is_causal, std::optional<double> scale, const Tensor& dropout_keep) {
  const double s = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
  Tensor scores = q.matmul(k.transpose(-2, -1)) * s;  // (..., L, S)
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor mask = attn_mask;
  if (is_causal) mask = ones({L, S}, TensorOptions(kBool).device(q.device())).tril();  // keys j <= i
  if (mask.defined()) scores = scores + additive_mask(mask, scores.dtype());
  // A row with every key masked gets weights 0 (PyTorch's safe softmax): it is made finite
  // before the softmax, so neither its weights nor their gradients are NaN, and zeroed after.
  const Tensor dead = scores.max(-1, true).first.eq(-std::numeric_limits<double>::infinity());  // (..., L, 1)
  Tensor weights = scores.masked_fill(dead, 0.0).softmax(-1).masked_fill(dead, 0.0);
  if (dropout_p > 0 && dropout_keep.defined())
    weights = weights.masked_fill(dropout_keep.logical_not(), 0.0) * (1.0 / (1.0 - dropout_p));
  else if (dropout_p > 0)
    weights = ::loom::dropout(weights, dropout_p, true);
  return weights.matmul(v);  // (..., L, Ev)
}

Tensor sdpa_dropout_mask(uint64_t seed, uint64_t offset, int64_t N, int64_t L, int64_t S, double p) {
  LOOM_CHECK(N >= 0 && L >= 0 && S >= 0 && p >= 0 && p < 1, ValueError,
             "sdpa_dropout_mask: expected sizes >= 0 and p in [0, 1), got N ", N, ", L ", L, ", S ", S, ", p ", p);
  Tensor keep = empty({N, L, S}, kBool);  // (N, L, S)
  bool* out = keep.data_ptr<bool>();
  namespace ad = kernels::attention_dropout;
  const ad::KeepMask m = ad::keep_mask({p, seed, offset}, S);
  for (int64_t g = 0; g < N * L; ++g)  // global row g = n L + i
    for (int64_t j = 0; j < S; j += 4) {
      const unsigned bits = ad::keep_bits4(m, g, j);
      for (int64_t e = 0; e < 4 && j + e < S; ++e) out[g * S + j + e] = bits >> e & 1;
    }
  return keep;
}

}  // namespace detail

namespace {
Tensor sdpa_untraced(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
                     double dropout_p, bool is_causal, std::optional<double> scale) {
  // Under autocast all in the lower precision, as PyTorch lists the op on both devices
  // (Note [autocast policy]); a bool mask stays bool. The policy is given here rather than
  // as a kAutocastOps row only because that header recompiles every file when touched.
  auto cast = [](const Tensor& t) { return t.defined() ? autocast::cast_input(t, kernels::kCastToLower) : t; };
  const Tensor q = cast(query), k = cast(key), v = cast(value), mask = cast(attn_mask);
  const Shape batch = checked_batch(q, k, v, mask, is_causal, dropout_p);
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  int64_t N = 1;
  for (int64_t d : batch) N *= d;
  const Tensor additive = mask.defined() ? additive_mask(mask, q.dtype()) : Tensor();
  // The fused tiers' operands (Note [attention tiers] in kernels/attention/attention_backend.h).
  // (B, H, ., .) heads, none broadcast, are read where they are (Note [attention head
  // layouts] in kernels/attention/attention_layout.h), as MultiheadAttention passes its projections;
  // the mask then stays (B, H, L, S) with stride 0 on its broadcast dims, never
  // materialised. Otherwise the batch dims are broadcast and merged into one: q (N, L, E),
  // k (N, S, E), v (N, S, Ev), the mask (N, L, S) a view with stride 0 where reshape allows.
  auto own_heads = [&](const Tensor& t) {
    return t.dim() == 4 && t.size(0) == batch[0] && t.size(1) == batch[1] && t.stride(3) == 1;
  };
  const bool heads = batch.size() == 2 && own_heads(q) && own_heads(k) && own_heads(v);
  auto merged = [&](const Tensor& t, int64_t rows, int64_t cols) {  // (B, H, rows, cols) or (N, rows, cols)
    const Tensor broadcast = t.expand(with_last_two(batch, rows, cols));
    return heads ? broadcast : broadcast.reshape({N, rows, cols});
  };
  const Tensor bias = additive.defined() ? merged(additive, L, S) : Tensor();
  const Tensor qf = fused_attention_operand(merged(q, L, E)), kf = fused_attention_operand(merged(k, S, E)),
               vf = fused_attention_operand(merged(v, S, Ev));
  const bool needs_backward = needs_grad(q, k, v);
  const kernels::SDPBackend tier = kernels::choose_sdp_backend(kOp, [&](kernels::SDPBackend b) -> std::string {
    if (mask.defined() && mask.requires_grad()) return "attn_mask requires grad, and the fused kernels give it none";
    return kernels::attention_refusal(b, qf, kf, vf, bias, is_causal, dropout_p, needs_backward);
  });
  // The mask as the fused tiers take it: additive already (a float mask is its own).
  if (tier == kernels::SDPBackend::MATH) return detail::sdpa_reference(q, k, v, additive, dropout_p, is_causal, scale);
  const double s = scale.value_or(1.0 / std::sqrt(double(E)));
  const Tensor out = fused_attention(qf, kf, vf, bias, is_causal, s, dropout_p, tier);
  return heads ? out : out.reshape(with_last_two(batch, L, Ev));  // (B, H, L, Ev) or (..., L, Ev)
}
}  // namespace

// Recorded whole for ONNX export (Note [op tracing], core/trace.h): ints = is_causal, floats = the scale (NaN:
// the default 1 / sqrt(E)) and dropout_p.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  const trace::OpScope trace;
  Tensor out = sdpa_untraced(query, key, value, attn_mask, dropout_p, is_causal, scale);
  if (trace)
    trace.record({"sdpa", {query, key, value, attn_mask}, {out}, {is_causal},
                  {scale.value_or(std::numeric_limits<double>::quiet_NaN()), dropout_p}});
  return out;
}

}  // namespace loom
