// The class-index losses' rows (nn::functional::cross_entropy and nll_loss, nn/loss.cpp, which
// check the options, flatten the classes and reduce): the targets' weights, checked on the
// device without a sync, and cross-entropy as one node (log_softmax and the weighted NLL with
// label smoothing), as PyTorch's.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace loom {

// What a class-index loss weighs each row by: w[y] for kept rows, 0 for rows whose target is
// ignore_index. "mean" divides by their sum, as PyTorch.
struct ClassTargets {
  Tensor w;           // (C) class weights, ones when none are given
  Tensor safe;        // (M) targets, ignored rows -> class 0
  Tensor keep;        // (M) 1 for kept rows, 0 for ignored ones, in the scores' dtype
  Tensor row_weight;  // (M) w[y] · keep
};

// The rows' targets and weights for scores (M, C), target (M) int64 and weight (C) or
// undefined; a target outside [0, C) (other than ignore_index) is an IndexError naming op and
// context, raised at once on the CPU and at the next sync on a GPU (Note [deferred device
// checks] in kernels/support/device_check.h).
ClassTargets class_targets(const Tensor& scores, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                           const char* op, const std::string& context);

// -w[y] · scores[m, y] for each row m (0 for ignored rows): (M, C) -> (M).
Tensor nll_rows(const Tensor& scores, const ClassTargets& t);

// rows (M) = (1 - eps) · NLL of log_softmax(scores) + eps/C · Σ_c -w_c log p_c, with one
// backward node: d rows_m / d scores_m = softmax_m · Σ_c q_mc - q_m for the target
// distribution q (M, C).
Tensor cross_entropy_rows(const Tensor& scores, const ClassTargets& t, double label_smoothing);

}  // namespace loom
