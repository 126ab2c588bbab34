// Watching and steering a training run: a live progress line (progress.h), the metrics on
// disk (metrics_log.h), SVG curves of them (plot.h), TensorBoard event files
// (summary_writer.h), the end-of-run summary (run_summary.h), gradient accumulation
// (gradient_accumulation.h) and early stopping with the best epoch (early_stopping.h), as
// tqdm, a CSV logger, matplotlib, torch.utils.tensorboard, a final print and Lightning's
// EarlyStopping do for a PyTorch script.
#pragma once

#include "train/early_stopping.h"
#include "train/gradient_accumulation.h"
#include "train/graphed_step.h"
#include "train/metrics_log.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/run_summary.h"
#include "train/summary_writer.h"
