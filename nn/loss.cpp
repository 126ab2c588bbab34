#include "nn/loss.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/factories.h"
#include "core/ops.h"
#include "kernels/kernels.h"

namespace loom::nn::functional {
namespace {

void check_reduction(const std::string& r, const char* op) {
  LOOM_CHECK(r == "mean" || r == "sum" || r == "none", ValueError, op,
             ": reduction must be 'mean', 'sum' or 'none', got '", r, "'");
}

Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "sum") return loss.sum();
  if (reduction == "mean") return loss.mean();
  return loss;
}

void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  LOOM_CHECK(input.sizes() == target.sizes(), ShapeError, op, ": input of shape ", shape_str(input.sizes()),
             " and target of shape ", shape_str(target.sizes()), " differ");
}

// Class-index losses see (M, C) scores and (M) targets: the class dim moves last and the
// rest flattens, (N, C, d1, ...) -> (N·d1·..., C).
struct FlatClasses {
  Tensor scores;  // (M, C)
  Tensor target;  // (M) int64
  Shape target_shape, input_shape;
};

FlatClasses flatten_classes(const Tensor& input, const Tensor& target, const char* op) {
  LOOM_CHECK(input.dim() >= 2, ShapeError, op, ": input must be (N, C) or (N, C, d1, ...), got shape ",
             shape_str(input.sizes()));
  LOOM_CHECK(input.is_floating_point(), DTypeError, op, ": input must be floating point, got ",
             dtype_name(input.dtype()));
  LOOM_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, DTypeError, op,
             ": target must hold class indices (int64 or int32), got ", dtype_name(target.dtype()));
  LOOM_CHECK(target.device() == input.device(), DeviceError, op, ": target on ", target.device(), ", input on ",
             input.device());
  Shape expected = input.sizes();
  expected.erase(expected.begin() + 1);
  LOOM_CHECK(target.sizes() == expected, ShapeError, op, ": target of shape ", shape_str(target.sizes()),
             " does not fit input of shape ", shape_str(input.sizes()), " (expected ", shape_str(expected), ")");
  const int64_t C = input.size(1);
  Tensor scores = input;
  if (input.dim() > 2) {
    Dims order{0};
    for (int64_t d = 2; d < input.dim(); ++d) order.push_back(d);
    order.push_back(1);
    scores = input.permute(order).reshape({-1, C});
  }
  return {scores, target.reshape({-1}).to(kInt64), target.sizes(), input.sizes()};
}

// values.gather(dim, index) without the range check or autograd: for target indices that
// row_weights has checked already.
Tensor gather_checked(const Tensor& values, int64_t dim, const Tensor& index) {
  Tensor out = empty(index.sizes(), values.options());
  kernels::gather(out, values, dim, index);
  return out;
}

// The class weights of each row: w[y] for kept rows, 0 for rows whose target is
// ignore_index. "mean" divides by their sum, as PyTorch.
struct RowWeights {
  Tensor w;           // (C) class weights, ones when none are given
  Tensor safe;        // (M) targets, ignored rows -> class 0
  Tensor keep;        // (M) 1 for kept rows, 0 for ignored ones, in the scores' dtype
  Tensor row_weight;  // (M) w[y] · keep
};

RowWeights row_weights(const FlatClasses& f, const CrossEntropyLossOptions& o, const char* op) {
  const int64_t C = f.scores.size(1);
  Tensor w = o.weight_.defined() ? o.weight_ : ones({C}, f.scores.options());
  LOOM_CHECK(w.device() == f.scores.device(), DeviceError, op, ": weight on ", w.device(), ", input on ",
             f.scores.device(), " (a loss module's weight follows ->to(device))");
  LOOM_CHECK(w.dim() == 1 && w.size(0) == C, ShapeError, op, ": weight of shape ", shape_str(w.sizes()),
             " does not match ", C, " classes of input ", shape_str(f.input_shape));
  w = w.detach().to(f.scores.dtype());
  Tensor keep = f.target.ne(o.ignore_index_);                // (M) bool
  Tensor safe = where(keep, f.target, zeros({}, f.target.options()));  // (M), on the target's device
  // On a GPU without waiting for it (Note [deferred device checks] in kernels/device_check.h).
  const std::string context = loom::detail::str("input ", shape_str(f.input_shape), " (ignore_index ",
                                                o.ignore_index_, ")");
  kernels::check_class_targets(safe, C, op, context);
  Tensor keep_f = keep.to(f.scores.dtype());
  return {w, safe, keep_f, gather_checked(w, 0, safe) * keep_f};
}

// -w[y] · scores[m, y] for each row m (0 for ignored rows): (M, C) -> (M).
Tensor nll_rows(const Tensor& scores, const RowWeights& r) {
  const Tensor index = r.safe.unsqueeze(1);  // (M, 1)
  const Tensor picked = needs_grad(scores) ? scores.gather(1, index) : gather_checked(scores, 1, index);
  return picked.squeeze(1) * r.row_weight.neg();
}

// Applies the reduction of a class-index loss: "mean" divides by the kept rows' weights.
Tensor reduce_class_loss(const Tensor& rows, const RowWeights& r, const FlatClasses& f,
                         const std::string& reduction) {
  if (reduction == "none") return rows.reshape(f.target_shape);
  if (reduction == "sum") return rows.sum();
  return rows.sum() / r.row_weight.sum();
}

// A loss's input and target as autocast gives them to `op` (Note [autocast]).
std::pair<Tensor, Tensor> autocast_pair(const char* op, const Tensor& input, const Tensor& target) {
  std::vector<Tensor> cast = autocast::cast_inputs(op, {input, target});
  return {cast[0], cast[1]};
}

}  // namespace

Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in, const CrossEntropyLossOptions& o) {
  const char* op = "cross_entropy";
  const auto [input, target] = autocast_pair(op, input_in, target_in);
  check_reduction(o.reduction_, op);
  const double eps = o.label_smoothing_;
  LOOM_CHECK(eps >= 0 && eps <= 1, ValueError, op, ": label_smoothing must be in [0, 1], got ", eps);
  FlatClasses f = flatten_classes(input, target, op);
  RowWeights r = row_weights(f, o, op);
  const double C = double(f.scores.size(1));
  Tensor logp, rows;
  {
    NoGradGuard no_grad;
    logp = f.scores.log_softmax(1);                         // (M, C)
    // (1 - eps) · NLL + eps/C · Σ_c -w_c log p_c, as PyTorch (no 0 · -inf from masked logits
    // without smoothing).
    rows = nll_rows(logp, r) * (1.0 - eps);                 // (M)
    if (eps > 0) rows = rows - (logp * r.w).sum(1) * r.keep * (eps / C);
  }
  if (needs_grad(f.scores)) {
    // rows_m = -Σ_c q_mc log p_mc with the target distribution q (M, C): (1 - eps) · w[y] on
    // the target class plus eps/C · w on every class (0 for ignored rows). Then
    // d rows_m / d scores_m = softmax_m · Σ_c q_mc - q_m: log_softmax and NLL in one node.
    Tensor q = zeros(f.scores.sizes(), f.scores.options());  // (M, C): (1 - eps) w[y] at each target
    kernels::scatter_add(q, 1, r.safe.unsqueeze(1), (r.row_weight * (1.0 - eps)).unsqueeze(1));
    if (eps > 0) q = q + r.w.unsqueeze(0) * r.keep.unsqueeze(1) * (eps / C);
    record("CrossEntropyBackward", {f.scores}, {rows}, {logp, q}, [](BackwardContext& ctx) {
      const Tensor& logp = ctx.saved[0];
      const Tensor& q = ctx.saved[1];
      Tensor g = ctx.grad().unsqueeze(1);  // (M, 1)
      return std::vector<Tensor>{(logp.exp() * q.sum(1, true) - q) * g};
    });
  }
  return reduce_class_loss(rows, r, f, o.reduction_);
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target_in, const NLLLossOptions& o) {
  const char* op = "nll_loss";
  const auto [input, target] = autocast_pair(op, input_in, target_in);
  check_reduction(o.reduction_, op);
  LOOM_CHECK(o.label_smoothing_ == 0, ValueError, op, ": label_smoothing is for cross_entropy");
  FlatClasses f = flatten_classes(input, target, op);
  RowWeights r = row_weights(f, o, op);
  return reduce_class_loss(nll_rows(f.scores, r), r, f, o.reduction_);
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, const std::string& reduction) {
  const auto [input, target] = autocast_pair("mse_loss", input_in, target_in);
  check_reduction(reduction, "mse_loss");
  check_same_shape(input, target, "mse_loss");
  Tensor d = input - target;
  return reduce(d * d, reduction);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, const std::string& reduction) {
  const auto [input, target] = autocast_pair("l1_loss", input_in, target_in);
  check_reduction(reduction, "l1_loss");
  check_same_shape(input, target, "l1_loss");
  return reduce((input - target).abs(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, const SmoothL1LossOptions& o) {
  const auto [input, target] = autocast_pair("smooth_l1_loss", input_in, target_in);
  check_reduction(o.reduction_, "smooth_l1_loss");
  check_same_shape(input, target, "smooth_l1_loss");
  LOOM_CHECK(o.beta_ >= 0, ValueError, "smooth_l1_loss: beta must be non-negative, got ", o.beta_);
  Tensor d = (input - target).abs();
  if (o.beta_ == 0) return reduce(d, o.reduction_);
  // 0.5 d^2 / beta where d < beta, d - 0.5 beta elsewhere.
  return reduce(where(d < o.beta_, d * d * (0.5 / o.beta_), d - 0.5 * o.beta_), o.reduction_);
}

Tensor binary_cross_entropy_with_logits(const Tensor& x_in, const Tensor& y_in, const BCEWithLogitsLossOptions& o) {
  const auto [x, y] = autocast_pair("binary_cross_entropy_with_logits", x_in, y_in);
  check_reduction(o.reduction_, "binary_cross_entropy_with_logits");
  check_same_shape(x, y, "binary_cross_entropy_with_logits");
  for (const Tensor* t : {&y, &o.weight_, &o.pos_weight_})
    LOOM_CHECK(!t->defined() || t->device() == x.device(), DeviceError, "binary_cross_entropy_with_logits: ",
               t == &y ? "target" : t == &o.weight_ ? "weight" : "pos_weight", " on ", t->device(), ", input on ",
               x.device(), " (a loss module's weights follow ->to(device))");
  LOOM_CHECK(y.is_floating_point(), DTypeError, "binary_cross_entropy_with_logits: target of shape ",
             shape_str(y.sizes()), " must be floating point (probabilities), got ", dtype_name(y.dtype()));
  // Stable form: (1 - y) x + (1 + (pw - 1) y) (log(1 + e^-|x|) + max(-x, 0)).
  Tensor softplus_neg = x.abs().neg().exp().log1p() + x.neg().clamp(0.0, std::nullopt);
  Tensor log_weight = o.pos_weight_.defined() ? (o.pos_weight_ - 1.0) * y + 1.0 : Tensor();
  Tensor loss = (1.0 - y) * x + (log_weight.defined() ? log_weight * softplus_neg : softplus_neg);
  if (o.weight_.defined()) loss = loss * o.weight_;
  return reduce(loss, o.reduction_);
}

}  // namespace loom::nn::functional
