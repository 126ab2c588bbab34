#include "nn/loss.h"

#include "autograd/function.h"
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
  Shape target_shape;
};

FlatClasses flatten_classes(const Tensor& input, const Tensor& target, const char* op) {
  LOOM_CHECK(input.dim() >= 2, ShapeError, op, ": input must be (N, C) or (N, C, d1, ...), got shape ",
             shape_str(input.sizes()));
  LOOM_CHECK(input.is_floating_point(), DTypeError, op, ": input must be floating point, got ",
             dtype_name(input.dtype()));
  LOOM_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, DTypeError, op,
             ": target must hold class indices (int64 or int32), got ", dtype_name(target.dtype()));
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
  return {scores, target.reshape({-1}).to(kInt64), target.sizes()};
}

// The target distribution q (M, C): (1 - eps) · w[y] on the target class plus eps/C · w on
// every class, zero for rows whose target is ignore_index. Its row sums are the weights
// that "mean" divides by: w[y] of the kept rows, as PyTorch.
struct TargetDistribution {
  Tensor q;           // (M, C)
  Tensor row_weight;  // (M) w[y], 0 for ignored rows
};

TargetDistribution target_distribution(const FlatClasses& f, const CrossEntropyLossOptions& o, const char* op) {
  const int64_t C = f.scores.size(1);
  const TensorOptions opt = f.scores.options();
  Tensor w = o.weight_.defined() ? o.weight_ : ones({C}, opt);
  LOOM_CHECK(w.dim() == 1 && w.size(0) == C, ShapeError, op, ": weight of shape ", shape_str(w.sizes()),
             " does not match ", C, " classes");
  w = w.detach().to(f.scores.dtype());
  Tensor keep = f.target.ne(o.ignore_index_);                     // (M) bool
  Tensor safe = where(keep, f.target, zeros({}, kInt64));         // (M) ignored rows -> class 0
  if (safe.numel() > 0) {
    const int64_t lo = safe.min().item<int64_t>(), hi = safe.max().item<int64_t>();
    LOOM_CHECK(lo >= 0 && hi < C, IndexError, op, ": target class ", lo < 0 ? lo : hi,
               " is out of range for ", C, " classes (ignore_index ", o.ignore_index_, ")");
  }
  Tensor keep_f = keep.to(f.scores.dtype());
  Tensor row_weight = w.index_select(0, safe) * keep_f;          // (M)
  const double eps = o.label_smoothing_;
  Tensor q = one_hot(safe, C).to(f.scores.dtype()) * row_weight.unsqueeze(1) * (1.0 - eps);
  if (eps > 0) q = q + w.unsqueeze(0) * keep_f.unsqueeze(1) * (eps / double(C));
  return {q, row_weight};
}

// Applies the reduction of a class-index loss: "mean" divides by the kept rows' weights.
Tensor reduce_class_loss(const Tensor& rows, const TargetDistribution& t, const FlatClasses& f,
                         const std::string& reduction) {
  if (reduction == "none") return rows.reshape(f.target_shape);
  if (reduction == "sum") return rows.sum();
  return rows.sum() / t.row_weight.sum();
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyLossOptions& o) {
  const char* op = "cross_entropy";
  check_reduction(o.reduction_, op);
  LOOM_CHECK(o.label_smoothing_ >= 0 && o.label_smoothing_ <= 1, ValueError, op,
             ": label_smoothing must be in [0, 1], got ", o.label_smoothing_);
  FlatClasses f = flatten_classes(input, target, op);
  TargetDistribution t = target_distribution(f, o, op);
  Tensor logp, rows;
  {
    NoGradGuard no_grad;
    logp = f.scores.log_softmax(1);          // (M, C)
    rows = (t.q * logp).sum(1).neg();        // (M) -Σ_c q log p
  }
  if (needs_grad(f.scores)) {
    // d rows_m / d scores_m = softmax_m · Σ_c q_mc - q_m: log_softmax and NLL in one node.
    record("CrossEntropyBackward", {f.scores}, {rows}, {logp, t.q}, [](BackwardContext& ctx) {
      const Tensor& logp = ctx.saved[0];
      const Tensor& q = ctx.saved[1];
      Tensor g = ctx.grad().unsqueeze(1);  // (M, 1)
      return std::vector<Tensor>{(logp.exp() * q.sum(1, true) - q) * g};
    });
  }
  return reduce_class_loss(rows, t, f, o.reduction_);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  const char* op = "nll_loss";
  check_reduction(o.reduction_, op);
  LOOM_CHECK(o.label_smoothing_ == 0, ValueError, op, ": label_smoothing is for cross_entropy");
  FlatClasses f = flatten_classes(input, target, op);
  TargetDistribution t = target_distribution(f, o, op);
  return reduce_class_loss((t.q * f.scores).sum(1).neg(), t, f, o.reduction_);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "mse_loss");
  check_same_shape(input, target, "mse_loss");
  Tensor d = input - target;
  return reduce(d * d, reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "l1_loss");
  check_same_shape(input, target, "l1_loss");
  return reduce((input - target).abs(), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o) {
  check_reduction(o.reduction_, "smooth_l1_loss");
  check_same_shape(input, target, "smooth_l1_loss");
  LOOM_CHECK(o.beta_ >= 0, ValueError, "smooth_l1_loss: beta must be non-negative, got ", o.beta_);
  Tensor d = (input - target).abs();
  if (o.beta_ == 0) return reduce(d, o.reduction_);
  // 0.5 d^2 / beta where d < beta, d - 0.5 beta elsewhere.
  return reduce(where(d < o.beta_, d * d * (0.5 / o.beta_), d - 0.5 * o.beta_), o.reduction_);
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y, const BCEWithLogitsLossOptions& o) {
  check_reduction(o.reduction_, "binary_cross_entropy_with_logits");
  check_same_shape(x, y, "binary_cross_entropy_with_logits");
  // Stable form: (1 - y) x + (1 + (pw - 1) y) (log(1 + e^-|x|) + max(-x, 0)).
  Tensor softplus_neg = x.abs().neg().exp().log1p() + x.neg().clamp(0.0, std::nullopt);
  Tensor log_weight = o.pos_weight_.defined() ? (o.pos_weight_ - 1.0) * y + 1.0 : Tensor();
  Tensor loss = (1.0 - y) * x + (log_weight.defined() ? log_weight * softplus_neg : softplus_neg);
  if (o.weight_.defined()) loss = loss * o.weight_;
  return reduce(loss, o.reduction_);
}

}  // namespace loom::nn::functional
