// Line charts as self-contained SVG files (open them in a browser): training curves
// without Python's matplotlib.
//
//   train::write_svg("loss.svg", {{"train", epochs, train_loss}, {"val", epochs, val_loss}},
//                    {.title = "loss", .x_label = "epoch", .y_label = "loss"});
//   train::write_training_curves("runs/sentiment", log);  // _loss.svg, _accuracy.svg
//
// Axes get "nice" ticks (1, 2 or 5 times a power of ten; powers of ten on a log axis),
// each series its own colour and a legend entry; either axis can be logarithmic (a log-log
// chart shows power laws as straight lines). NaN and infinite points (and points <= 0
// on a log axis) are left out and break the line there; a single point is drawn as a dot,
// and a constant series gets a padded range.
#pragma once

#include <string>
#include <vector>

namespace loom::train {

class MetricsLog;

struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int width = 640, height = 400;  // pixels, at least 240 x 160
  bool log_x = false, log_y = false;  // log10 axes: decade ticks, points <= 0 left out
};

// Throws ValueError for no series, x and y of different sizes or a too-small size, and
// SerializationError naming path when the file cannot be written.
void write_svg(const std::string& path, const std::vector<Series>& series, const PlotOptions& options = {});

// The SVG text write_svg writes.
std::string render_svg(const std::vector<Series>& series, const PlotOptions& options = {});

// From the log's epoch rows: <prefix>_loss.svg with every key containing "loss" and
// <prefix>_accuracy.svg with every key containing "acc" (case-insensitive), against epoch.
// A chart with no such key is not written. Returns the paths written.
std::vector<std::string> write_training_curves(const std::string& path_prefix, const MetricsLog& log);

// Tick values for the range [lo, hi]: multiples of a step of 1, 2 or 5 times a power of
// ten, about `target` of them, covering the range (the first <= lo, the last >= hi).
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

}  // namespace loom::train
