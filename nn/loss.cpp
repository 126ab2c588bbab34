#include "nn/loss.h"

#include "autograd/autocast.h"
#include "autograd/functions/cross_entropy.h"
#include "core/factories.h"
#include "core/ops.h"

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

// The rows' targets and weights (autograd/functions/cross_entropy.h), after the checks of the
// weight option that name the loss's options.
ClassTargets row_weights(const FlatClasses& f, const CrossEntropyLossOptions& o, const char* op) {
  const int64_t C = f.scores.size(1);
  if (o.weight_.defined()) {
    LOOM_CHECK(o.weight_.device() == f.scores.device(), DeviceError, op, ": weight on ", o.weight_.device(),
               ", input on ", f.scores.device(), " (a loss module's weight follows ->to(device))");
    LOOM_CHECK(o.weight_.dim() == 1 && o.weight_.size(0) == C, ShapeError, op, ": weight of shape ",
               shape_str(o.weight_.sizes()), " does not match ", C, " classes of input ", shape_str(f.input_shape));
  }
  const std::string context = loom::detail::str("input ", shape_str(f.input_shape), " (ignore_index ",
                                                o.ignore_index_, ")");
  return class_targets(f.scores, f.target, o.weight_, o.ignore_index_, op, context);
}

// Applies the reduction of a class-index loss: "mean" divides by the kept rows' weights.
Tensor reduce_class_loss(const Tensor& rows, const ClassTargets& r, const FlatClasses& f,
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
  ClassTargets r = row_weights(f, o, op);
  const Tensor rows = cross_entropy_rows(f.scores, r, eps);  // (M), one backward node
  return reduce_class_loss(rows, r, f, o.reduction_);
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target_in, const NLLLossOptions& o) {
  const char* op = "nll_loss";
  const auto [input, target] = autocast_pair(op, input_in, target_in);
  check_reduction(o.reduction_, op);
  LOOM_CHECK(o.label_smoothing_ == 0, ValueError, op, ": label_smoothing is for cross_entropy");
  FlatClasses f = flatten_classes(input, target, op);
  ClassTargets r = row_weights(f, o, op);
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
