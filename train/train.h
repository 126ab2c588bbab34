// Watching and steering a training run: a live progress line (progress.h), the metrics on
// disk (metrics_log.h), SVG curves of them (plot.h), TensorBoard event files
// (summary_writer.h), the end-of-run summary (run_summary.h), gradient accumulation
// (gradient_accumulation.h), early stopping with the best epoch (early_stopping.h) and the
// profiler's scope and outputs (profile.h), as tqdm, a CSV logger, matplotlib,
// torch.utils.tensorboard, a final print, Lightning's EarlyStopping and torch.profiler do for a
// PyTorch script.
#pragma once

#include "train/early_stopping.h"
#include "train/gradient_accumulation.h"
#include "train/graphed_step.h"
#include "train/metrics_log.h"
#include "train/plot.h"
#include "train/profile.h"
#include "train/progress.h"
#include "train/run_summary.h"
#include "train/summary_writer.h"
