// Watching and steering a training run, in four rooms: the loop's helpers (train/loop/),
// progress and metrics (train/metrics/), the profiler's outputs (train/profiler/) and
// TensorBoard's event files (train/tensorboard/); what tqdm, a CSV logger, matplotlib,
// Lightning's EarlyStopping, torch.profiler and torch.utils.tensorboard do for a PyTorch
// script.
#pragma once

#include "train/loop/loop.h"
#include "train/metrics/metrics.h"
#include "train/profiler/profiler.h"
#include "train/tensorboard/tensorboard.h"
