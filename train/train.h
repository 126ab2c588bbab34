// Watching a training run: a live progress line (progress.h), the metrics on disk
// (metrics_log.h), SVG curves of them (plot.h), TensorBoard event files (summary_writer.h)
// and the end-of-run summary (run_summary.h), as tqdm, a CSV logger, matplotlib,
// torch.utils.tensorboard and a final print do for a PyTorch script.
#pragma once

#include "train/metrics_log.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/run_summary.h"
#include "train/summary_writer.h"
