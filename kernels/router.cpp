// The device-neutral kernel entry points of kernels/kernels.h (Note [kernel routing] in
// kernels/backend.h): each checks what holds on every device — its operands share one
// device, above all — once, and calls that device's backend.
#include "core/deterministic.h"
#include "kernels/backend.h"
#include "kernels/rnn/rnn_layer_check.h"
#include "kernels/support/recorded_kernel.h"

namespace loom::kernels {
namespace {

// DeviceError naming `op` unless every defined operand is on operands[0]'s device; that
// device's backend. A kernel handed tensors on two devices would read one of them through
// a pointer it cannot use.
const Backend& route(const char* op, std::initializer_list<const Tensor*> operands) {
  const Device device = (*operands.begin())->device();
  for (const Tensor* t : operands)
    LOOM_CHECK(!t->defined() || t->device() == device, DeviceError, op, ": expected tensors on one device, got ",
               device, " and ", t->device());
  return backend_for(device, op);
}

// The slot of `b` for `op`, or a DeviceError when the backend has no such kernel. Every
// kernel call goes through here, so this is where the profiler sees each op (a
// RecordedKernel calls the slot as it is while no Profile records): `op` is its event's
// name, so it must be a string literal (an entry point given its caller's name for messages
// passes its own name here).
template <typename F>
RecordedKernel<F> slot(const Backend& b, F Backend::*kernel, const char* op) {
  F f = b.*kernel;
  LOOM_CHECK(f != nullptr, DeviceError, op, ": the ", b.name, " backend of this build has no kernel for it");
  return {f, op};
}

// What a fused optimizer update reads: `what` defined, contiguous, on p's device, of p's
// dtype and size. A state tensor left on another device (an optimizer made before the
// model moved) would otherwise be read through a pointer the loop cannot use.
void check_update_operand(const char* op, const Tensor& p, const Tensor& t, const char* what) {
  LOOM_CHECK(t.defined(), ValueError, op, ": the parameter has no ", what);
  LOOM_CHECK(t.device() == p.device(), DeviceError, op, ": ", what, " on ", t.device(), " but the parameter on ",
             p.device());
  LOOM_CHECK(t.dtype() == p.dtype() && t.sizes() == p.sizes(), ValueError, op, ": ", what, " ",
             shape_str(t.sizes()), " ", dtype_name(t.dtype()), " does not match its parameter ", shape_str(p.sizes()),
             " ", dtype_name(p.dtype()));
  LOOM_CHECK(t.is_contiguous(), ValueError, op, ": the update needs a contiguous ", what);
}

}  // namespace

void check_amp_scalar(const char* op, const Tensor& t, DType dtype, const char* what, Device device);  // below

namespace {

// Every parameter's operands of a fused update, on the first parameter's device and of its
// dtype, and the update's scalar tensors there (Note [capturable optimizers]).
template <size_t K>
const Backend& route_update(const char* op, const ParamList<K>& list, const UpdateScalars& scalars) {
  const size_t n = list.params.size();
  LOOM_ASSERT(n > 0 && list.grads.size() == n && list.states.size() == n, op, ": a malformed parameter list");
  const Tensor& first = list.params.front();
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = list.params[i];
    LOOM_CHECK(p.device() == first.device() && p.dtype() == first.dtype(), ValueError, op,
               ": one fused update takes parameters of one device and dtype, got ", dtype_name(first.dtype()), " on ",
               first.device(), " and ", dtype_name(p.dtype()), " on ", p.device());
    check_update_operand(op, p, p, "parameter");
    check_update_operand(op, p, list.grads[i], "gradient");
    for (const Tensor& s : list.states[i])
      if (s.defined()) check_update_operand(op, p, s, "state tensor");
  }
  if (scalars.device_lr.defined()) {
    check_amp_scalar(op, scalars.device_lr, kFloat64, "the learning rate", first.device());
    LOOM_ASSERT(scalars.device_steps.empty() || scalars.device_steps.size() == n, op, ": a step count per parameter");
    for (const Tensor& step : scalars.device_steps)
      check_amp_scalar(op, step, kFloat64, "a step count", first.device());
    if (scalars.found_inf.defined()) check_amp_scalar(op, scalars.found_inf, kFloat32, "found_inf", first.device());
  } else {
    LOOM_ASSERT(scalars.steps.size() == n, op, ": a step count per parameter");
  }
  return backend_for(first.device(), op);
}

}  // namespace

const Backend& backend_for(Device device, const char* op) {
  if (device.is_cpu()) return cpu_backend();
  const Backend* cuda = cuda_backend();
  LOOM_CHECK(cuda != nullptr, DeviceError, op, ": tensor on ", device,
             " has no kernels in this build (Loom was built without CUDA support)");
  return *cuda;
}

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0, double arg1, double arg2) {
  slot(route("unary", {&out, &in}), &Backend::unary, "unary")(op, out, in, arg0, arg1, arg2);
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  slot(route("binary", {&out, &a, &b}), &Backend::binary, "binary")(op, out, a, b, alpha);
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  slot(route("where", {&out, &cond, &a, &b}), &Backend::where, "where")(out, cond, a, b);
}

void copy(const Tensor& dst, const Tensor& src) {
  slot(route("copy", {&dst, &src}), &Backend::copy, "copy")(dst, src);
}

// A transfer runs on the backend of the side that is not the CPU (host <-> device, or
// device <-> device).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Device device = dst.is_cpu() ? src.device() : dst.device();
  const char* op = "copy across devices";
  slot(backend_for(device, op), &Backend::copy_across_devices, op)(dst, src, non_blocking);
}

void fill(const Tensor& dst, Scalar value) {
  slot(route("fill", {&dst}), &Backend::fill, "fill")(dst, value);
}

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  slot(route("uniform_", {&dst}), &Backend::uniform, "uniform_")(dst, low, high, seed, offset);
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  slot(route("normal_", {&dst}), &Backend::normal, "normal_")(dst, mean, std, seed, offset);
}

void bernoulli(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset) {
  slot(route("bernoulli", {&dst, &p}), &Backend::bernoulli, "bernoulli")(dst, p, seed, offset);
}

void bernoulli(const Tensor& dst, double p, uint64_t seed, uint64_t offset) {
  LOOM_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli: p must be in [0, 1], got ", p);
  slot(route("bernoulli", {&dst}), &Backend::bernoulli_scalar, "bernoulli")(dst, p, seed, offset);
}

void randint(const Tensor& dst, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  slot(route("randint", {&dst}), &Backend::randint, "randint")(dst, low, high, seed, offset);
}

void multinomial(const Tensor& out, const Tensor& probs, bool replacement, uint64_t seed, uint64_t offset) {
  const char* op = "multinomial";
  LOOM_ASSERT(out.dim() == 2 && probs.dim() == 2 && out.size(0) == probs.size(0) && out.dtype() == kInt64 &&
                  out.is_contiguous() && probs.is_contiguous(),
              op, ": bad arguments");
  slot(route(op, {&out, &probs}), &Backend::multinomial, op)(out, probs, replacement, seed, offset);
}

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const Dims& dims) {
  slot(route("reduce", {&out, &in}), &Backend::reduce, "reduce")(op, out, in, dims);
}

void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  const char* op = is_max ? "max" : "min";
  slot(route(op, {&values, &indices, &in}), &Backend::arg_reduce, op)(is_max, values, indices, in, dim);
}

void variance(const Tensor& out, const Tensor& in, const Dims& dims, int64_t correction) {
  slot(route("var", {&out, &in}), &Backend::variance, "var")(out, in, dims, correction);
}

void cumsum(const Tensor& out, const Tensor& in, int64_t dim) {
  slot(route("cumsum", {&out, &in}), &Backend::cumsum, "cumsum")(out, in, dim);
}

void sort(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
  const char* op = "sort";
  LOOM_ASSERT(in.dim() == 2 && values.dim() == 2 && values.sizes() == indices.sizes() &&
                  values.size(0) == in.size(0) && values.size(1) <= in.size(1) && values.dtype() == in.dtype() &&
                  indices.dtype() == kInt64 && in.is_contiguous() && values.is_contiguous() &&
                  indices.is_contiguous(),
              op, ": bad arguments");
  slot(route(op, {&values, &indices, &in}), &Backend::sort, op)(values, indices, in, descending);
}

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  slot(route("softmax", {&out, &in}), &Backend::softmax, "softmax")(out, in, dim, log);
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& y, int64_t dim, bool log) {
  const char* op = "softmax_backward";
  slot(route(op, {&grad_in, &grad_out, &y}), &Backend::softmax_backward, op)(grad_in, grad_out, y, dim, log);
}

void bmm(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  slot(route("bmm", {&out, &a, &b}), &Backend::bmm, "bmm")(out, a, b, beta);
}

namespace {

// An attention operand as kernels/attention/attention.h allows it: (N, rows, cols) contiguous, or
// (B, H, rows, cols) with a unit column stride and rows that do not overlap.
bool attention_operand_ok(const Tensor& t) {
  if (t.dim() == 3) return t.is_contiguous();
  return t.dim() == 4 && attention_heads_in_place(t);
}

bool attention_operands_ok(std::initializer_list<const Tensor*> ts) {
  const int64_t dim = (*ts.begin())->dim();
  for (const Tensor* t : ts)
    if (t->dim() != dim || !attention_operand_ok(*t)) return false;
  return true;
}

}  // namespace

namespace {
// What the fused forwards take (nn/attention.cpp makes it so): a failure is Loom's bug.
void check_attention_forward(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& bias, const AttentionDropout& dropout) {
  LOOM_ASSERT(attention_operands_ok({&q, &k, &v, &out}) && lse.dim() == 2 && lse.is_contiguous() &&
                  (!bias.defined() || bias.dim() == q.dim()) && dropout.p >= 0 && dropout.p < 1,
              op, ": bad arguments");
}
}  // namespace

bool attention_heads_in_place(const Tensor& t) {
  return (t.stride(3) == 1 || t.size(3) <= 1) && (t.size(2) <= 1 || t.stride(2) >= t.size(3));
}

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention";
  check_attention_forward(op, out, lse, q, k, v, bias, dropout);
  slot(route(op, {&out, &lse, &q, &k, &v, &bias}), &Backend::attention_forward, op)(out, lse, q, k, v, bias, causal,
                                                                                   scale, dropout);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention_backward";
  LOOM_ASSERT(attention_operands_ok({&q, &k, &v, &out, &grad_out, &dq, &dk, &dv}) && dropout.p >= 0 && dropout.p < 1,
              op, ": bad arguments");
  slot(route(op, {&dq, &dk, &dv, &grad_out, &q, &k, &v, &out, &lse, &bias}), &Backend::attention_backward, op)(
      dq, dk, dv, grad_out, q, k, v, out, lse, bias, causal, scale, dropout);
}

void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& bias, bool causal, double scale,
                             const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention (cuDNN)";
  check_attention_forward(op, out, lse, q, k, v, bias, dropout);
  slot(route(op, {&out, &lse, &q, &k, &v, &bias}), &Backend::cudnn_attention_forward, op)(out, lse, q, k, v, bias,
                                                                                         causal, scale, dropout);
}

void cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention_backward (cuDNN)";
  LOOM_ASSERT(attention_operands_ok({&q, &k, &v, &out, &dq, &dk, &dv}) && dropout.p >= 0 && dropout.p < 1, op,
              ": bad arguments");
  slot(route(op, {&dq, &dk, &dv, &grad_out, &q, &k, &v, &out, &lse, &bias}), &Backend::cudnn_attention_backward, op)(
      dq, dk, dv, grad_out, q, k, v, out, lse, bias, causal, scale, dropout);
}

std::string attention_refusal(SDPBackend backend, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& bias, bool causal, double dropout_p, bool needs_backward) {
  const Backend& b = backend_for(q.device(), "scaled_dot_product_attention");
  // Under deterministic mode Loom's fused CUDA backward is refused; cuDNN's takes its
  // deterministic algorithm (Note [deterministic algorithms]).
  if (std::string why = deterministic_attention_refusal(backend, q.is_cuda(), needs_backward,
                                                        are_deterministic_algorithms_enabled());
      !why.empty())
    return why;
  if (backend == SDPBackend::FLASH_ATTENTION) {
    if (b.attention_forward == nullptr || b.attention_backward == nullptr)
      return ::loom::detail::str("the ", b.name, " backend has no fused attention kernels");
    return b.attention_refusal ? b.attention_refusal(q, v) : std::string();
  }
  if (backend == SDPBackend::CUDNN_ATTENTION) {
    if (b.cudnn_attention_refusal == nullptr)
      return ::loom::detail::str("the ", b.name, " backend of this build has no cuDNN attention");
    return b.cudnn_attention_refusal(q, k, v, bias, causal, dropout_p, needs_backward);
  }
  return {};
}

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  LOOM_ASSERT(x.dim() == 2 && y.sizes() == x.sizes() && y.is_contiguous() && x.is_contiguous() &&
                  mean.numel() == x.size(0) && rstd.numel() == x.size(0) && mean.is_contiguous() &&
                  rstd.is_contiguous() &&
                  (!weight.defined() || (weight.numel() == x.size(1) && weight.is_contiguous())) &&
                  (!bias.defined() || (bias.numel() == x.size(1) && bias.is_contiguous())),
              op, ": bad arguments");
  slot(route(op, {&y, &mean, &rstd, &x, &weight, &bias}), &Backend::layer_norm_forward, op)(y, mean, rstd, x, weight,
                                                                                           bias, eps);
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const char* op = "layer_norm_backward";
  LOOM_ASSERT(x.dim() == 2 && dy.sizes() == x.sizes() && dy.is_contiguous() && x.is_contiguous() &&
                  (!dx.defined() || (dx.sizes() == x.sizes() && dx.is_contiguous())) &&
                  (!dweight.defined() ||
                   (weight.defined() && dweight.numel() == x.size(1) && dweight.is_contiguous())) &&
                  (!dbias.defined() || (dbias.numel() == x.size(1) && dbias.is_contiguous())),
              op, ": bad arguments");
  slot(route(op, {&x, &dx, &dweight, &dbias, &dy, &mean, &rstd, &weight}), &Backend::layer_norm_backward, op)(
      dx, dweight, dbias, dy, x, mean, rstd, weight);
}

bool has_layer_norm_kernels(const Tensor& x) {
  const Backend& b = backend_for(x.device(), "layer_norm");
  return b.layer_norm_forward != nullptr && b.layer_norm_backward != nullptr;
}

void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  const char* op = "index_select";
  slot(route(op, {&out, &in, &index}), &Backend::index_select, op)(out, in, dim, index);
}

void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  slot(route("index_add", {&out, &index, &src}), &Backend::index_add, "index_add")(out, dim, index, src);
}

void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  slot(route("gather", {&out, &in, &index}), &Backend::gather, "gather")(out, in, dim, index);
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const char* op = "scatter_add";
  slot(route(op, {&out, &index, &src}), &Backend::scatter_add, op)(out, dim, index, src);
}

void triangle(const Tensor& out, const Tensor& in, int64_t k, bool lower) {
  const char* op = lower ? "tril" : "triu";
  slot(route(op, {&out, &in}), &Backend::triangle, op)(out, in, k, lower);
}

void check_indices(const Tensor& index, int64_t size, const char* op) {
  slot(route(op, {&index}), &Backend::check_indices, "check_indices")(index, size, op);
}

void check_class_targets(const Tensor& target, int64_t classes, const char* op, const std::string& context) {
  slot(route(op, {&target}), &Backend::check_class_targets, op)(target, classes, op, context);
}

void check_sequence_lengths(const Tensor& lengths, int64_t T, const char* op, const std::string& context) {
  slot(route(op, {&lengths}), &Backend::check_sequence_lengths, op)(lengths, T, op, context);
}

RNNLayerOutput rnn_layer_forward(const RNNLayerInput& in) {
  check_rnn_layer(in);
  return slot(backend_for(in.x.device(), "rnn"), &Backend::rnn_layer_forward, "rnn")(in);
}

RNNLayerGrads rnn_layer_backward(const RNNLayerInput& in, const RNNReserve& reserve, const Tensor& dy,
                                 const Tensor& dh_n, const Tensor& dc_n) {
  check_rnn_layer(in);
  return slot(route("rnn backward", {&in.x, &dy, &dh_n, &dc_n}), &Backend::rnn_layer_backward, "rnn backward")(
      in, reserve, dy, dh_n, dc_n);
}

bool rnn_stack_supported(const Tensor& x) {
  const Backend& b = backend_for(x.device(), "rnn");
  return b.rnn_stack_supports != nullptr && b.rnn_stack_supports(x);
}

RNNStackOutput rnn_stack_forward(const RNNStackConfig& config, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths) {
  const char* op = "rnn (whole stack)";
  return slot(route(op, {&x, &hx, &cx}), &Backend::rnn_stack_forward, op)(config, x, hx, cx, weights, lengths);
}

RNNStackGrads rnn_stack_backward(const RNNStackSaved& saved, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const Tensor& y, const Tensor& dy, const Tensor& dhy, const Tensor& dcy) {
  const char* op = "rnn backward (whole stack)";
  return slot(route(op, {&x, &hx, &cx, &y, &dy, &dhy, &dcy}), &Backend::rnn_stack_backward, op)(
      saved, x, hx, cx, y, dy, dhy, dcy);
}

void sgd_update(const char* op, const ParamList<1>& list, const SgdHyper& hyper, const UpdateScalars& scalars) {
  if (list.params.empty()) return;
  slot(route_update(op, list, scalars), &Backend::sgd_update, "sgd_update")(op, list, hyper, scalars);
}

void adam_update(const char* op, const ParamList<3>& list, const AdamHyper& hyper, const UpdateScalars& scalars) {
  if (list.params.empty()) return;
  slot(route_update(op, list, scalars), &Backend::adam_update, "adam_update")(op, list, hyper, scalars);
}

void rmsprop_update(const char* op, const ParamList<3>& list, const RmspropHyper& hyper,
                    const UpdateScalars& scalars) {
  if (list.params.empty()) return;
  slot(route_update(op, list, scalars), &Backend::rmsprop_update, "rmsprop_update")(op, list, hyper, scalars);
}

// The gradient scaler's (1,) float32 / int32 operand.
void check_amp_scalar(const char* op, const Tensor& t, DType dtype, const char* what, Device device) {
  LOOM_CHECK(t.defined() && t.dtype() == dtype && t.numel() == 1 && t.device() == device, ValueError, op, ": ",
             what, " must be a one-element ", dtype_name(dtype), " tensor on ", device, ", got ",
             t.defined() ? shape_str(t.sizes()) + " " + dtype_name(t.dtype()) + " on " + t.device().str()
                         : std::string("an undefined tensor"));
}

void unscale_grads(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "unscale_grads";
  if (grads.empty()) return;
  const Device device = grads.front().device();
  for (const Tensor& g : grads) {
    LOOM_CHECK(g.is_floating_point() && g.is_contiguous(), ValueError, op,
               ": expected contiguous floating-point gradients, got ", shape_str(g.sizes()), " ",
               dtype_name(g.dtype()));
    LOOM_CHECK(g.device() == device, DeviceError, op, ": expected gradients on one device, got ", device, " and ",
               g.device());
  }
  check_amp_scalar(op, found_inf, kFloat32, "found_inf", device);
  check_amp_scalar(op, inv_scale, kFloat32, "inv_scale", device);
  slot(backend_for(device, op), &Backend::unscale_grads, op)(grads, found_inf, inv_scale);
}

void multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  const char* op = "multi_tensor_norm";
  LOOM_CHECK(p > 0, ValueError, op, ": the norm's order p must be positive, got ", p);
  LOOM_CHECK(out.defined() && out.dtype() == kFloat64 && out.dim() == 0, ValueError, op,
             ": out must be a () float64 tensor, got ",
             out.defined() ? shape_str(out.sizes()) + " " + dtype_name(out.dtype()) : std::string("an undefined tensor"));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    LOOM_CHECK(t.defined() && t.is_floating_point() && t.is_contiguous(), ValueError, op, ": tensor ", i,
               " must be contiguous and floating point, got ",
               t.defined() ? shape_str(t.sizes()) + " " + dtype_name(t.dtype()) : std::string("an undefined tensor"));
    LOOM_CHECK(t.device() == out.device(), DeviceError, op, ": tensor ", i, " is on ", t.device(), " but out is on ",
               out.device());
  }
  slot(backend_for(out.device(), op), &Backend::multi_tensor_norm, op)(tensors, p, out);
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  double growth_factor, double backoff_factor, int64_t growth_interval) {
  const char* op = "update_scale";
  check_amp_scalar(op, scale, kFloat32, "scale", scale.device());
  check_amp_scalar(op, growth_tracker, kInt32, "growth_tracker", scale.device());
  check_amp_scalar(op, found_inf, kFloat32, "found_inf", scale.device());
  LOOM_CHECK(growth_interval >= 1 && growth_interval <= INT32_MAX, ValueError, op,
             ": growth_interval must be in [1, 2^31), got ", growth_interval);
  slot(backend_for(scale.device(), op), &Backend::update_scale, op)(scale, growth_tracker, found_inf, growth_factor,
                                                                    backoff_factor, growth_interval);
}

}  // namespace loom::kernels
