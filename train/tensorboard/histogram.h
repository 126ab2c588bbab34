// The histogram of a set of values as TensorBoard stores it (HistogramProto), computed as
// torch.utils.tensorboard's add_histogram does with its default bins="tensorflow":
//
//   edges: 0, ±1e-12 · 1.1^k for k = 0, 1, ... while below 1e20 (1549 edges, 1548 bins)
//   bin i: [edge[i], edge[i+1]), the last bin closed on the right (numpy.histogram);
//          values outside the edges (|v| >= ~1e20, ±inf, NaN) fall in no bin
//   kept:  the bins from the first to the last non-empty one, plus the bin just left of
//          them (an empty one if there is none), because TensorBoard stores only each
//          bin's right edge (bucket_limit) and draws a bin from the previous limit
//
// min, max, num, sum and sum_squares are of all the values (NaN if one is NaN, as numpy).
#pragma once

#include <span>
#include <vector>

namespace loom::train {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // right edge of each kept bin, increasing
  std::vector<double> bucket;        // count of values in each kept bin
};

// TensorBoard's default bin edges (above), computed once.
const std::vector<double>& default_histogram_edges();

// edges must be increasing, with at least two. Throws ValueError for no values, or when
// no value falls inside the edges (nothing to draw; PyTorch raises there too).
Histogram make_histogram(std::span<const double> values,
                         const std::vector<double>& edges = default_histogram_edges());

}  // namespace loom::train
