// What every example's --smoke-test checks: a few epochs on a small subset, and the
// training loss must clearly fall (CTest runs each example this way).
#pragma once

#include <cstdio>

#include "train/metrics/metrics_log.h"

namespace examples {

// For --smoke-test: true when the last epoch's mean training loss is clearly below the
// first's (on a small subset the model must at least start to fit).
inline bool loss_fell(const loom::train::MetricsLog& log, const char* key = "train_loss") {
  const auto& epochs = log.epochs();
  if (epochs.size() < 2) return false;
  const double first = *epochs.front().get(key), last = *epochs.back().get(key);
  std::printf("smoke test: %s %.4f -> %.4f\n", key, first, last);
  return last < 0.9 * first;
}

}  // namespace examples
