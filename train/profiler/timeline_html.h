// A profile as one self-contained HTML page: a timeline of every thread's events (nested by
// depth) and every GPU stream's, which the mouse zooms (wheel), pans (drag) and explains
// (hover: name, times, self time, input shapes), opening on the whole recording or on the
// window #from=MS&to=MS of its address; then the key_averages() table. The data and
// the script are inside the page: it opens in any browser with no network.
#pragma once

#include <string>

#include "train/profiler/profile_table.h"

namespace loom::profiler {

// The page (Profile::export_html writes it to a file).
std::string timeline_html(const Analysis& a);

}  // namespace loom::profiler
