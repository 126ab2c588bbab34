// cuDNN's fused attention, the CUDNN_ATTENTION tier (Note [attention tiers] in
// kernels/attention/attention_backend.h): the SDPA forward and backward graphs of cuDNN's frontend
// C++ API (header-only: the include/ of PyPI's nvidia-cudnn-frontend, which
// scripts/install-deps.sh puts in .venv-tools/ and cmake/LoomCudnnFrontend.cmake finds),
// calling the libcudnn Loom links already. Each signature's graphs are built once and kept
// (Note [cuDNN attention plans] in kernels/attention/cudnn_attention_plan.h).
// Layouts as PyTorch's (aten/src/ATen/native/cudnn/MHA.cpp): every tensor 4-D (B, H, rows,
// cols) with its own strides, a 3-D (N, rows, cols) call as (N, 1, rows, cols); the
// logsumexp (cuDNN's "Stats") (B, H, L, 1) float32, which is lse (N, L); the scale passed
// by value; the dropout seed and offset as one-element int64 tensors on the device (filled
// by a kernel, so no step copies from the host).
// Compiled to an empty registration without cuDNN or without the frontend's headers
// (LOOM_WITH_CUDNN_FRONTEND): the tier then refuses every call, and the others run.
#include "kernels/cuda/backend.h"

#if defined(LOOM_WITH_CUDNN) && defined(LOOM_WITH_CUDNN_FRONTEND)

#include <cudnn_frontend.h>

#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "core/factories.h"
#include "kernels/attention/attention_layout.h"
#include "kernels/attention/cudnn_attention_plan.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cudnn_attention_masks.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/device_properties.h"
#include "kernels/cuda/reduce_geometry.h"
#include "kernels/support/lru_cache.h"

namespace loom::kernels::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;
using Strides = AttentionSignature::Strides;

// The graphs' tensors, by uid.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kScale, kSeed, kOffset, kSeqQ, kSeqKV, kDO, kDQ, kDK, kDV };

// One signature's graphs: the forward, and the backward once a call needed it; or why cuDNN
// refused either (Note [cuDNN attention plans]).
struct Plans {
  std::shared_ptr<fe::graph::Graph> forward, backward;
  std::string forward_refusal, backward_refusal;
  bool backward_tried = false;
  int64_t forward_workspace = 0, backward_workspace = 0;
};

using PlanCache = LruCache<AttentionSignature, Plans, AttentionSignatureHash>;

// This thread's plans; never destroyed, as the cuDNN handles (kernels/cuda/cudnn_util.h):
// the graphs release cuDNN descriptors, and at thread exit the driver may be gone.
PlanCache& plan_cache() {
  thread_local PlanCache* cache = new PlanCache(kCudnnPlanCacheCapacity);
  return *cache;
}

// cuDNN's version and the device's compute capability.
CudnnAttentionLimits limits_of(int device) {
  const DeviceProperties& p = device_properties(device);
  return {int64_t(cudnnGetVersion()), p.major * 10 + p.minor};
}

// Whether every operand's data starts on a 16-byte boundary (the tensor memory accelerator's).
bool aligned16(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && !is_aligned16(t->data())) return false;
  return true;
}

fe::DataType_t io_type(DType dtype) { return dtype == kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF; }

std::vector<int64_t> vec(const Strides& s) { return {s[0], s[1], s[2], s[3]}; }

TensorPtr input(fe::graph::Graph& g, const char* name, Uid uid, std::vector<int64_t> dims, const Strides& strides) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(vec(strides)));
}

// A (1, 1, 1, 1) or (B, 1, 1, 1) tensor: the scale (by value), the dropout seed and offset,
// the padding lengths.
TensorPtr scalar_input(fe::graph::Graph& g, const char* name, Uid uid, int64_t count, fe::DataType_t type,
                       bool by_value) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({count, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(type)
                      .set_is_pass_by_value(by_value));
}

// The gradient layout fused_attention makes for a (B, H, rows, ·) operand: its output's.
Strides grad_strides(const AttentionSignature& s, int64_t rows, int64_t cols) {
  return attention_output_strides(s.heads, s.H, rows, cols);
}

// What the forward and backward graphs share: the scale, the mask and the dropout, set on
// either graph's attributes (SDPA_attributes or SDPA_backward_attributes).
template <typename Attributes>
void set_common(fe::graph::Graph& g, Attributes& a, const AttentionSignature& s) {
  a.set_attn_scale(scalar_input(g, "attn_scale", kScale, 1, fe::DataType_t::FLOAT, true));
  if (s.causal)  // PyTorch's is_causal: keys j <= i, top-left aligned
    a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  if (s.mask != AttentionMaskKind::None) {
    // As PyTorch passes a mask: (B, 1 or H, L, S), stride 0 on the broadcast B and L.
    const bool per_head = s.H > 1 && s.bias[1] != 0;
    const Strides strides{s.bias[0], per_head ? s.bias[1] : s.L * s.S, s.bias[2], s.bias[3]};
    a.set_bias(input(g, "bias", kBias, {s.B, per_head ? s.H : 1, s.L, s.S}, strides));
  }
  if (s.mask == AttentionMaskKind::KeyPadding)
    a.set_padding_mask(true)
        .set_seq_len_q(scalar_input(g, "seq_len_q", kSeqQ, s.B, fe::DataType_t::INT32, false))
        .set_seq_len_kv(scalar_input(g, "seq_len_kv", kSeqKV, s.B, fe::DataType_t::INT32, false));
  if (s.dropout_p > 0)
    a.set_dropout(float(s.dropout_p), scalar_input(g, "seed", kSeed, 1, fe::DataType_t::INT64, false),
                  scalar_input(g, "offset", kOffset, 1, fe::DataType_t::INT64, false));
}

// Validates, lowers and plans g: "" when it is ready to execute, with its workspace size in
// `workspace`; else cuDNN's reason.
std::string build(fe::graph::Graph& g, cudnnHandle_t handle, int64_t& workspace) {
  count_cudnn_attention_graph_built();
  try {
    fe::error_t st = g.validate();
    if (st.is_good()) st = g.build_operation_graph(handle);
    if (st.is_good()) st = g.create_execution_plans({fe::HeurMode_t::A});
    if (st.is_good()) st = g.check_support(handle);
    if (st.is_good()) st = g.build_plans();
    if (st.is_good()) st = g.get_workspace_size(workspace);
    return st.is_good() ? std::string() : "cuDNN: " + st.get_message();
  } catch (const std::exception& e) {  // the frontend's own exceptions, if it is built with them
    return std::string("cuDNN: ") + e.what();
  }
}

std::shared_ptr<fe::graph::Graph> new_graph(const AttentionSignature& s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(s.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// out (B, H, L, Ev) and Stats (B, H, L, 1) = lse (N, L) from q, k, v.
std::shared_ptr<fe::graph::Graph> forward_graph(const AttentionSignature& s) {
  auto g = new_graph(s);
  const TensorPtr q = input(*g, "Q", kQ, {s.B, s.H, s.L, s.E}, s.q), k = input(*g, "K", kK, {s.B, s.H, s.S, s.E}, s.k),
                  v = input(*g, "V", kV, {s.B, s.H, s.S, s.Ev}, s.v);
  fe::graph::SDPA_attributes a;
  a.set_name("loom_sdpa").set_generate_stats(true);
  set_common(*g, a, s);
  auto [o, stats] = g->sdpa(q, k, v, a);
  o->set_output(true).set_uid(kO).set_dim({s.B, s.H, s.L, s.Ev}).set_stride(vec(s.out));
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.B, s.H, s.L, 1})
      .set_stride({s.H * s.L, s.L, 1, 1});
  return g;
}

// dq, dk, dv (laid out as fused_attention makes them) from q, k, v, out, dout (out's
// layout) and Stats.
std::shared_ptr<fe::graph::Graph> backward_graph(const AttentionSignature& s) {
  auto g = new_graph(s);
  const TensorPtr q = input(*g, "Q", kQ, {s.B, s.H, s.L, s.E}, s.q), k = input(*g, "K", kK, {s.B, s.H, s.S, s.E}, s.k),
                  v = input(*g, "V", kV, {s.B, s.H, s.S, s.Ev}, s.v),
                  o = input(*g, "O", kO, {s.B, s.H, s.L, s.Ev}, s.out),
                  dout = input(*g, "dO", kDO, {s.B, s.H, s.L, s.Ev}, s.out);
  const TensorPtr stats = g->tensor(fe::graph::Tensor_attributes()
                                        .set_name("Stats")
                                        .set_uid(kStats)
                                        .set_dim({s.B, s.H, s.L, 1})
                                        .set_stride({s.H * s.L, s.L, 1, 1})
                                        .set_data_type(fe::DataType_t::FLOAT));
  fe::graph::SDPA_backward_attributes a;
  // In deterministic mode dq is a GEMM over a stored dP, not added with atomics (Note [cuDNN
  // attention plans]).
  a.set_name("loom_sdpa_backward").set_deterministic_algorithm(s.deterministic);
  set_common(*g, a, s);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, a);
  dq->set_output(true).set_uid(kDQ).set_dim({s.B, s.H, s.L, s.E}).set_stride(vec(grad_strides(s, s.L, s.E)));
  dk->set_output(true).set_uid(kDK).set_dim({s.B, s.H, s.S, s.E}).set_stride(vec(grad_strides(s, s.S, s.E)));
  dv->set_output(true).set_uid(kDV).set_dim({s.B, s.H, s.S, s.Ev}).set_stride(vec(grad_strides(s, s.S, s.Ev)));
  return g;
}

// The signature's plans, the forward graph built on first sight (Note [cuDNN attention
// plans]); the reference holds until this thread's next plans_for.
Plans& plans_for(const AttentionSignature& s, const Tensor& like) {
  PlanCache& cache = plan_cache();
  if (Plans* known = cache.find(s)) return *known;
  Plans plans;
  plans.forward = forward_graph(s);
  plans.forward_refusal = build(*plans.forward, cudnn_handle(like.device().index, stream_of(like)),
                                plans.forward_workspace);
  if (!plans.forward_refusal.empty()) plans.forward.reset();
  return cache.insert(s, std::move(plans));
}

// Builds the backward graph the first time a call of the signature needs one.
void ensure_backward(Plans& plans, const AttentionSignature& s, const Tensor& like) {
  if (plans.backward_tried) return;
  plans.backward_tried = true;
  plans.backward = backward_graph(s);
  plans.backward_refusal = build(*plans.backward, cudnn_handle(like.device().index, stream_of(like)),
                                 plans.backward_workspace);
  if (!plans.backward_refusal.empty()) plans.backward.reset();
}

// Why cuDNN would not take the call, before any build: its rules (Note [cuDNN attention
// plans]), the operands' alignment and the mask's dtype.
std::string refusal_before_build(const AttentionSignature& s, std::initializer_list<const Tensor*> operands,
                                 const Tensor& bias, bool needs_backward) {
  std::string why = refusal_by_cudnn_rules(s, limits_of(s.device), needs_backward);
  if (!why.empty()) return why;
  if (!aligned16(operands) || !aligned16({&bias}))
    return "cuDNN's attention needs every operand's data on a 16-byte boundary";
  if (bias.defined() && bias.dtype() != s.dtype)
    return std::string("cuDNN's attention needs a mask of the operands' dtype, got ") + dtype_name(bias.dtype());
  return {};
}

// What a call passes besides its operands: the scale (by value), the dropout's seed and
// offset, a key-padding mask's lengths (cuDNN's padding mask: every query row, the keys up
// to the last the mask keeps). All filled on the GPU, without waiting for it.
struct CallInputs {
  float scale = 1;
  Tensor seed, offset, seq_q, seq_kv;

  CallInputs(const AttentionSignature& s, const Tensor& bias, double scale_in, const AttentionDropout& dropout,
             Device device)
      : scale(float(scale_in)) {
    const TensorOptions i64 = TensorOptions(kInt64).device(device), i32 = TensorOptions(kInt32).device(device);
    if (s.dropout_p > 0) {
      seed = empty({1}, i64), offset = empty({1}, i64);
      fill(seed, int64_t(dropout.seed));
      fill(offset, int64_t(dropout.offset));
    }
    if (s.mask == AttentionMaskKind::KeyPadding) {
      seq_q = empty({s.B}, i32), seq_kv = empty({s.B}, i32);
      fill(seq_q, s.L);
      key_counts(seq_kv, bias);
    }
  }

  void add_to(std::unordered_map<int64_t, void*>& pack, const Tensor& bias) {
    pack[kScale] = &scale;
    if (bias.defined()) pack[kBias] = bias.data();
    if (seed.defined()) pack[kSeed] = seed.data(), pack[kOffset] = offset.data();
    if (seq_q.defined()) pack[kSeqQ] = seq_q.data(), pack[kSeqKV] = seq_kv.data();
  }
};

void execute(const fe::graph::Graph& g, int64_t workspace_bytes, std::unordered_map<int64_t, void*>& pack,
             const Tensor& like, const char* op) {
  const Tensor workspace = device_bytes(size_t(workspace_bytes), like.device(), false);
  fe::error_t st = g.execute(cudnn_handle(like.device().index, stream_of(like)), pack, workspace.data());
  LOOM_CHECK(st.is_good(), CudaError, op, ": cuDNN's graph failed to execute: ", st.get_message());
}

std::string cudnn_attention_refusal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                                    bool causal, double dropout_p, bool needs_backward) {
  ::loom::cuda::DeviceGuard guard(q.device());
  const AttentionSignature s = attention_signature(q, k, v, Tensor(), bias, causal, dropout_p);
  const std::string why = refusal_before_build(s, {&q, &k, &v}, bias, needs_backward);
  if (!why.empty()) return why;
  Plans& plans = plans_for(s, q);
  if (!plans.forward) return plans.forward_refusal;
  if (needs_backward) ensure_backward(plans, s, q);
  return needs_backward && !plans.backward ? plans.backward_refusal : std::string();
}

void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention (cuDNN)";
  // The dropout's Philox seed and offset are launch arguments: a replayed graph would drop
  // the same weights every step (Note [CUDA graph capture]).
  if (dropout.p > 0) ::loom::cuda::detail::check_not_capturing("scaled_dot_product_attention with dropout");
  ::loom::cuda::DeviceGuard guard(q.device());
  const AttentionSignature s = attention_signature(q, k, v, out, bias, causal, dropout.p);
  const std::string why = refusal_before_build(s, {&q, &k, &v, &out}, bias, false);
  LOOM_CHECK(why.empty(), NotImplementedError, op, ": ", why);
  LOOM_ASSERT(lse.dtype() == kFloat32 && lse.numel() == s.B * s.H * s.L, op, ": lse must be (N, L) float32");
  Plans& plans = plans_for(s, q);
  LOOM_CHECK(plans.forward != nullptr, NotImplementedError, op, ": ", plans.forward_refusal);
  CallInputs inputs(s, bias, scale, dropout, q.device());
  std::unordered_map<int64_t, void*> pack{
      {kQ, q.data()}, {kK, k.data()}, {kV, v.data()}, {kO, out.data()}, {kStats, lse.data()}};
  inputs.add_to(pack, bias);
  execute(*plans.forward, plans.forward_workspace, pack, q, op);
  // Rows with every key masked: 0 and lse +inf, as the other tiers give them.
  if (s.mask != AttentionMaskKind::None) zero_dead_rows(out, lse, inputs.seq_kv, s.H);
}

void cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention_backward (cuDNN)";
  ::loom::cuda::DeviceGuard guard(q.device());
  const AttentionSignature s = attention_signature(q, k, v, out, bias, causal, dropout.p);
  const std::string why = refusal_before_build(s, {&q, &k, &v, &out, &dq, &dk, &dv}, bias, true);
  LOOM_CHECK(why.empty(), NotImplementedError, op, ": ", why);
  LOOM_ASSERT(attention_strides(dq) == grad_strides(s, s.L, s.E) && attention_strides(dk) == grad_strides(s, s.S, s.E) &&
                  attention_strides(dv) == grad_strides(s, s.S, s.Ev),
              op, ": the gradients must be laid out as fused_attention makes them");
  Plans& plans = plans_for(s, q);
  ensure_backward(plans, s, q);
  LOOM_CHECK(plans.backward != nullptr, NotImplementedError, op, ": ",
             plans.forward ? plans.backward_refusal : plans.forward_refusal);
  // grad_out in out's layout, as the graph was built (a copy only when it comes otherwise).
  Tensor dout = grad_out;
  if (attention_strides(grad_out) != s.out || !aligned16({&grad_out})) {
    dout = alias_with(empty({out.numel()}, out.options()), out.sizes(), out.strides(), 0);
    copy(dout, grad_out);
  }
  // With padding lengths cuDNN may leave the padded keys' rows of dk and dv unwritten; their
  // gradient is 0 (every query masks them).
  if (s.mask == AttentionMaskKind::KeyPadding) fill(dk, 0), fill(dv, 0);
  CallInputs inputs(s, bias, scale, dropout, q.device());
  std::unordered_map<int64_t, void*> pack{{kQ, q.data()},    {kK, k.data()},   {kV, v.data()},   {kO, out.data()},
                                          {kDO, dout.data()}, {kStats, lse.data()}, {kDQ, dq.data()},
                                          {kDK, dk.data()},   {kDV, dv.data()}};
  inputs.add_to(pack, bias);
  execute(*plans.backward, plans.backward_workspace, pack, q, op);
}

}  // namespace

void add_cudnn_attention_kernels(Backend& b) {
  b.cudnn_attention_forward = &cudnn_attention_forward;
  b.cudnn_attention_backward = &cudnn_attention_backward;
  b.cudnn_attention_refusal = &cudnn_attention_refusal;
}

}  // namespace loom::kernels::cuda

#else  // without cuDNN or its frontend's headers: no CUDNN_ATTENTION tier

namespace loom::kernels::cuda {
void add_cudnn_attention_kernels(Backend&) {}
}  // namespace loom::kernels::cuda

#endif
