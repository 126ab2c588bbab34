// The class-index losses' rows: targets checked and weighed, and cross-entropy as one node
// (autograd/functions/cross_entropy.h).
#include "autograd/functions/cross_entropy.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "core/ops.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

// values.gather(dim, index) without the range check or autograd: for target indices that
// class_targets has checked already.
Tensor gather_checked(const Tensor& values, int64_t dim, const Tensor& index) {
  Tensor out = empty(index.sizes(), values.options());
  kernels::gather(out, values, dim, index);
  return out;
}

}  // namespace

ClassTargets class_targets(const Tensor& scores, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                           const char* op, const std::string& context) {
  const int64_t C = scores.size(1);
  Tensor w = weight.defined() ? weight.detach().to(scores.dtype()) : ones({C}, scores.options());
  Tensor keep = target.ne(ignore_index);                             // (M) bool
  Tensor safe = where(keep, target, zeros({}, target.options()));  // (M), on the target's device
  kernels::check_class_targets(safe, C, op, context);
  Tensor keep_f = keep.to(scores.dtype());
  return {w, safe, keep_f, gather_checked(w, 0, safe) * keep_f};
}

Tensor nll_rows(const Tensor& scores, const ClassTargets& t) {
  const Tensor index = t.safe.unsqueeze(1);  // (M, 1)
  const Tensor picked = needs_grad(scores) ? scores.gather(1, index) : gather_checked(scores, 1, index);
  return picked.squeeze(1) * t.row_weight.neg();
}

Tensor cross_entropy_rows(const Tensor& scores, const ClassTargets& t, double eps) {
  const double C = double(scores.size(1));
  Tensor logp, rows;
  {
    NoGradGuard no_grad;
    logp = scores.log_softmax(1);  // (M, C)
    // (1 - eps) · NLL + eps/C · Σ_c -w_c log p_c, as PyTorch (no 0 · -inf from masked logits
    // without smoothing).
    rows = nll_rows(logp, t) * (1.0 - eps);  // (M)
    if (eps > 0) rows = rows - (logp * t.w).sum(1) * t.keep * (eps / C);
  }
  if (needs_grad(scores)) {
    // rows_m = -Σ_c q_mc log p_mc with the target distribution q (M, C): (1 - eps) · w[y] on
    // the target class plus eps/C · w on every class (0 for ignored rows). Then
    // d rows_m / d scores_m = softmax_m · Σ_c q_mc - q_m: log_softmax and NLL in one node.
    Tensor q = zeros(scores.sizes(), scores.options());  // (M, C): (1 - eps) w[y] at each target
    kernels::scatter_add(q, 1, t.safe.unsqueeze(1), (t.row_weight * (1.0 - eps)).unsqueeze(1));
    if (eps > 0) q = q + t.w.unsqueeze(0) * t.keep.unsqueeze(1) * (eps / C);
    record("CrossEntropyBackward", {scores}, {rows}, {logp, q}, [](BackwardContext& ctx) {
      const Tensor& logp = ctx.saved[0];
      const Tensor& q = ctx.saved[1];
      Tensor g = ctx.grad().unsqueeze(1);  // (M, 1)
      return std::vector<Tensor>{(logp.exp() * q.sum(1, true) - q) * g};
    });
  }
  return rows;
}

}  // namespace loom
