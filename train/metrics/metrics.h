// Watching a run: a live progress line (progress.h), the metrics on disk (metrics_log.h),
// SVG curves of them (plot.h) and the end-of-run summary (run_summary.h), as tqdm, a CSV
// logger, matplotlib and a final print do for a PyTorch script.
#pragma once

#include "train/metrics/metrics_log.h"
#include "train/metrics/plot.h"
#include "train/metrics/progress.h"
#include "train/metrics/run_summary.h"
