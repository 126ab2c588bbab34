// The histogram of add_histogram: see histogram.h.
#include "train/tensorboard/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace loom::train {

const std::vector<double>& default_histogram_edges() {
  static const std::vector<double> edges = [] {
    // The same multiplications in the same order as PyTorch's Python floats (doubles), so
    // the edges are bit-identical to its.
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    std::vector<double> all;
    all.reserve(2 * positive.size() + 1);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), positive.begin(), positive.end());
    return all;
  }();
  return edges;
}

Histogram make_histogram(std::span<const double> values, const std::vector<double>& edges) {
  LOOM_CHECK(!values.empty(), ValueError, "add_histogram: the values are empty");
  LOOM_CHECK(edges.size() >= 2, ValueError, "make_histogram: need at least two bin edges, got ", edges.size());
  const size_t bins = edges.size() - 1;

  Histogram h;
  h.min = std::numeric_limits<double>::infinity();
  h.max = -std::numeric_limits<double>::infinity();
  bool any_nan = false;
  std::vector<double> counts(bins, 0.0);
  for (double v : values) {
    if (std::isnan(v)) {
      any_nan = true;
    } else {
      h.min = std::min(h.min, v);
      h.max = std::max(h.max, v);
    }
    h.sum += v;
    h.sum_squares += v * v;
    if (!(v >= edges.front() && v <= edges.back())) continue;  // outside, or NaN
    // The bin whose left edge is the last one <= v; v == the last edge goes in the last bin.
    const size_t right = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), v) - edges.begin());
    counts[std::min(right - 1, bins - 1)] += 1;
  }
  if (any_nan) h.min = h.max = std::numeric_limits<double>::quiet_NaN();
  h.num = static_cast<double>(values.size());

  size_t first = 0;
  while (first < bins && counts[first] == 0) ++first;
  LOOM_CHECK(first < bins, ValueError, "add_histogram: none of the ", values.size(),
             " values is inside the bins (all are NaN, infinite or beyond ", edges.back(), " in size)");
  size_t last = bins - 1;
  while (counts[last] == 0) --last;

  // The kept bins first-1 .. last (TensorBoard needs the left edge of the first non-empty
  // bin, stored as the right edge of the bin before it).
  if (first == 0) {
    h.bucket_limit.push_back(edges[0]);
    h.bucket.push_back(0);
  } else {
    --first;
  }
  for (size_t i = first; i <= last; ++i) {
    h.bucket_limit.push_back(edges[i + 1]);
    h.bucket.push_back(counts[i]);
  }
  return h;
}

}  // namespace loom::train
