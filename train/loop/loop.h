// The training loop's helpers: gradient accumulation (gradient_accumulation.h), early
// stopping with the best epoch (early_stopping.h), a step run eagerly or replayed as a
// CUDA graph (graphed_step.h), and a stop asked for by SIGTERM or SIGUSR1 (preemption.h).
#pragma once

#include "train/loop/early_stopping.h"
#include "train/loop/gradient_accumulation.h"
#include "train/loop/graphed_step.h"
#include "train/loop/preemption.h"
