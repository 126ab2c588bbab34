#include "train/loop/gradient_accumulation.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"

namespace loom::train {

GradientAccumulation::GradientAccumulation(size_t accum_steps, size_t batches_per_epoch)
    : accum_steps_(accum_steps), batches_(batches_per_epoch) {
  LOOM_CHECK(accum_steps >= 1, ValueError, "GradientAccumulation: accum_steps must be at least 1, got ", accum_steps);
  LOOM_CHECK(batches_per_epoch >= 1, ValueError,
             "GradientAccumulation: an epoch needs at least one batch, got batches_per_epoch 0");
}

void GradientAccumulation::check(size_t i) const {
  LOOM_CHECK(i < batches_, IndexError, "GradientAccumulation: micro-batch ", i, " of an epoch of ", batches_,
             " batches");
}

bool GradientAccumulation::starts_step(size_t i) const {
  check(i);
  return i % accum_steps_ == 0;
}

bool GradientAccumulation::ends_step(size_t i) const {
  check(i);
  return (i + 1) % accum_steps_ == 0 || i + 1 == batches_;
}

size_t GradientAccumulation::group_size(size_t i) const {
  check(i);
  const size_t first = i - i % accum_steps_;
  return std::min(accum_steps_, batches_ - first);
}

double GradientAccumulation::loss_factor(size_t i) const { return 1.0 / static_cast<double>(group_size(i)); }

std::optional<double> AccumulatedLoss::add(const GradientAccumulation& accumulation, size_t i, double loss) {
  sum_ += loss * accumulation.loss_factor(i);
  if (!accumulation.ends_step(i)) return std::nullopt;
  return std::exchange(sum_, 0.0);
}

}  // namespace loom::train
