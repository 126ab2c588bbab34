// GradientAccumulation: K micro-batches per optimizer step, as a PyTorch loop writes by hand
// (`loss = loss / K; loss.backward(); if ((i + 1) % K == 0) { step(); zero_grad(); }`),
// with the last, shorter group of an epoch handled.
//
//   train::GradientAccumulation accumulation(K, loader.size());
//   size_t i = 0;
//   for (auto& batch : loader) {
//     if (accumulation.starts_step(i)) optimizer.zero_grad();
//     Tensor loss = ...;
//     (loss * accumulation.loss_factor(i)).backward();
//     if (accumulation.ends_step(i)) { clip...; optimizer.step(); scheduler.step(); }
//     ++i;
//   }
//
// Each micro-batch's loss is divided by the size of its group: K for a full group, the
// remainder for the epoch's last group when K does not divide the batch count. So every
// optimizer step sees the mean of its micro-batches' mean losses, and with micro-batches
// of equal size B the gradients are those of one batch of K·B (tests/test_accumulation.cpp).
// With a GradScaler, scale each micro-batch's loss and unscale_/step/update once per step.
#pragma once

#include <cstddef>
#include <optional>

namespace loom::train {

class GradientAccumulation {
 public:
  // accum_steps >= 1 (1: a step per batch) and batches_per_epoch >= 1, else ValueError.
  GradientAccumulation(size_t accum_steps, size_t batches_per_epoch);

  // For micro-batch i of an epoch (0-based, < batches_per_epoch; else IndexError):
  bool starts_step(size_t i) const;  // the first of its group: zero the gradients before it
  bool ends_step(size_t i) const;    // the last of its group: step the optimizer after it
  double loss_factor(size_t i) const;  // 1 / (micro-batches in its group)
  size_t group_size(size_t i) const;

  size_t accum_steps() const { return accum_steps_; }
  size_t batches_per_epoch() const { return batches_; }
  size_t steps_per_epoch() const { return (batches_ + accum_steps_ - 1) / accum_steps_; }

 private:
  void check(size_t i) const;
  size_t accum_steps_, batches_;
};

// The loss of one optimizer step, for logging: the mean of its micro-batches' losses.
//
//   if (std::optional<double> step_loss = step_losses.add(accumulation, i, loss.item<double>()))
//     { ...clip, step...; log.log_step(epoch, ++step, {{"loss", *step_loss}}); }
class AccumulatedLoss {
 public:
  // Adds micro-batch i's loss; returns the step's loss when i ends the step (and starts
  // the next one from zero).
  std::optional<double> add(const GradientAccumulation& accumulation, size_t i, double loss);

 private:
  double sum_ = 0;
};

}  // namespace loom::train
