// The cuDNN attention graphs' key and the rules known before a build (Note [cuDNN
// attention plans] in kernels/attention/cudnn_attention_plan.h).
#include "kernels/attention/cudnn_attention_plan.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "core/deterministic.h"

namespace loom::kernels {
namespace {

using Strides = AttentionSignature::Strides;

// A mask's kind: one row of S per batch entry (stride 0, or size 1, over H and L) is a key
// padding mask.
AttentionMaskKind mask_kind(const Tensor& bias, const Strides& s, int64_t H, int64_t L) {
  if (!bias.defined()) return AttentionMaskKind::None;
  const bool one_row = (s[1] == 0 || H == 1) && (s[2] == 0 || L == 1);
  return one_row ? AttentionMaskKind::KeyPadding : AttentionMaskKind::Bias;
}

std::string dims_str(const AttentionSignature& s) {
  std::ostringstream os;
  os << "(B " << s.B << ", H " << s.H << ", L " << s.L << ", S " << s.S << ", E " << s.E << ", Ev " << s.Ev << ")";
  return os.str();
}

// Whether a 16-bit operand of these sizes and strides is one the tensor memory accelerator
// reads: a unit column stride and every other stride (of a dim longer than 1) a multiple
// of 8 elements (16 bytes). Stride 0 (a broadcast mask dim) is allowed.
bool tma_strides(const Strides& strides, const std::array<int64_t, 4>& sizes) {
  if (sizes[3] > 1 && strides[3] != 1) return false;
  for (int d = 0; d < 3; ++d)
    if (sizes[size_t(d)] > 1 && strides[size_t(d)] % 8 != 0) return false;
  return true;
}

thread_local size_t graphs_built = 0;

}  // namespace

size_t cudnn_attention_graphs_built() { return graphs_built; }
void count_cudnn_attention_graph_built() { ++graphs_built; }

size_t AttentionSignatureHash::operator()(const AttentionSignature& s) const {
  size_t h = 0;
  auto mix = [&h](int64_t v) { h ^= std::hash<int64_t>{}(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  for (int64_t v : {int64_t(s.device), int64_t(s.dtype), int64_t(s.heads), s.B, s.H, s.L, s.S, s.E, s.Ev,
                    int64_t(s.mask),
                    int64_t(s.causal), int64_t(s.dropout_p * 4294967296.0), int64_t(s.deterministic)})
    mix(v);
  for (const Strides* t : {&s.q, &s.k, &s.v, &s.out, &s.bias})
    for (int64_t v : *t) mix(v);
  return h;
}

Strides attention_strides(const Tensor& t) {
  if (t.dim() == 4) return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  return {t.stride(0), t.size(1) * t.size(2), t.stride(1), t.stride(2)};
}

Strides attention_output_strides(bool heads, int64_t H, int64_t rows, int64_t cols) {
  if (!heads) return {rows * cols, rows * cols, cols, 1};
  return {rows * H * cols, cols, H * cols, 1};  // (B, rows, H, cols) seen as (B, H, rows, cols)
}

Strides attention_output_strides(const Tensor& like, int64_t cols) {
  const bool heads = like.dim() == 4;
  return attention_output_strides(heads, heads ? like.size(1) : 1, like.size(-2), cols);
}

AttentionSignature attention_signature(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& bias, bool causal, double dropout_p) {
  AttentionSignature s;
  s.device = q.device().index;
  s.dtype = q.dtype();
  s.heads = q.dim() == 4;
  s.B = q.size(0), s.H = q.dim() == 4 ? q.size(1) : 1;
  s.L = q.size(-2), s.S = k.size(-2), s.E = q.size(-1), s.Ev = v.size(-1);
  s.q = attention_strides(q), s.k = attention_strides(k), s.v = attention_strides(v);
  s.out = out.defined() ? attention_strides(out) : attention_output_strides(q, s.Ev);
  if (bias.defined()) s.bias = attention_strides(bias);
  if (bias.defined() && bias.dim() == 3) s.bias[1] = 0;  // the size-1 head dim of a 3-D mask
  s.mask = mask_kind(bias, s.bias, s.H, s.L);
  s.causal = causal;
  s.dropout_p = dropout_p;
  s.deterministic = are_deterministic_algorithms_enabled();
  return s;
}

std::string refusal_by_cudnn_rules(const AttentionSignature& s, const CudnnAttentionLimits& limits,
                                   bool needs_backward) {
  std::ostringstream why;
  if (limits.version < 90000) {
    why << "cuDNN's attention graphs need cuDNN 9 or newer, found version " << limits.version;
  } else if (limits.sm < 80) {
    why << "cuDNN's attention graphs need compute capability 8.0 or newer, found " << limits.sm / 10 << "."
        << limits.sm % 10;
  } else if (s.dtype != kFloat16 && s.dtype != kBFloat16) {
    why << "cuDNN's attention takes float16 and bfloat16, got " << dtype_name(s.dtype);
  } else if (std::min({s.B, s.H, s.L, s.S, s.E, s.Ev}) < 1) {
    why << "cuDNN's attention takes no empty dims, got " << dims_str(s);
  } else if (s.E % 8 != 0 || s.Ev % 8 != 0) {
    why << "cuDNN's attention takes head dims that are multiples of 8, got E " << s.E << " and Ev " << s.Ev;
  } else if (const int64_t most = limits.sm / 10 == 9 ? 256 : 128; std::max(s.E, s.Ev) > most) {
    why << "cuDNN's attention takes head dims up to " << most << " on compute capability " << limits.sm / 10 << ".x, got "
        << std::max(s.E, s.Ev);
  } else if (needs_backward && s.L == 1 && s.S == 1) {
    why << "cuDNN's attention backward does not take L = S = 1";
  } else if (!tma_strides(s.q, {s.B, s.H, s.L, s.E}) || !tma_strides(s.k, {s.B, s.H, s.S, s.E}) ||
             !tma_strides(s.v, {s.B, s.H, s.S, s.Ev}) || !tma_strides(s.out, {s.B, s.H, s.L, s.Ev})) {
    why << "cuDNN's attention needs q, k, v and out with a unit last stride and the others multiples of 8 elements "
           "(16 bytes)";
  } else if (s.mask != AttentionMaskKind::None && !tma_strides(s.bias, {s.B, s.H, s.L, s.S})) {
    why << "cuDNN's attention needs a mask with a unit last stride and the others 0 or multiples of 8 elements, got "
           "strides ("
        << s.bias[0] << ", " << s.bias[1] << ", " << s.bias[2] << ", " << s.bias[3] << ")";
  }
  return why.str();
}

}  // namespace loom::kernels
