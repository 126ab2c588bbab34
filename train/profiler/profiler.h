// The profiler's scope and outputs, as torch.profiler: a scheduled Profile (profile.h), its
// key_averages() table (profile_table.h), the Chrome/Kineto trace (chrome_trace.h) and a
// self-contained timeline page (timeline_html.h).
#pragma once

#include "train/profiler/chrome_trace.h"
#include "train/profiler/profile.h"
#include "train/profiler/profile_table.h"
#include "train/profiler/timeline_html.h"
