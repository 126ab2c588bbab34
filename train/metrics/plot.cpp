// SVG line charts: see plot.h.
#include "train/metrics/plot.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "train/metrics/metrics_log.h"

namespace loom::train {

namespace {

// matplotlib's default colour cycle (tab10); series past the tenth are also dashed.
constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t kNumColours = sizeof kColours / sizeof kColours[0];
constexpr size_t kMaxMarkedPoints = 30;  // series this short also get a dot per point

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and line breaks are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

// At most max_chars characters (UTF-8 code points), the last one "…" when cut.
std::string shorten(const std::string& s, size_t max_chars) {
  auto is_lead = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; };
  size_t chars = 0, cut = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_lead(s[i])) continue;
    if (chars + 1 == max_chars) cut = i;  // where the "…" would go
    if (++chars > max_chars) return s.substr(0, cut) + "\xE2\x80\xA6";  // "…"
  }
  return s;
}

std::string fmt(double v) {  // pixel coordinates
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// A step of m * 10^e with m in {1, 2, 5}.
struct NiceStep {
  int m, e;
  double value() const { return m * std::pow(10.0, e); }
  // k steps, computed so that 3 * 0.2 is 0.6 and not 0.6000000000000001.
  double times(long long k) const {
    const double units = static_cast<double>(k * m);
    return e >= 0 ? units * std::pow(10.0, e) : units / std::pow(10.0, -e);
  }
};

NiceStep nice_step(double range, int target) {
  const double raw = range / target;
  int e = static_cast<int>(std::floor(std::log10(raw)));
  const double norm = raw / std::pow(10.0, e);
  int m = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  if (m == 10) {
    m = 1;
    ++e;
  }
  return {m, e};
}

std::string tick_label(double v, int step_exponent) {
  if (v == 0) v = 0;  // no "-0"
  char buf[48];
  if (std::abs(v) >= 1e7 || step_exponent < -6) {
    std::snprintf(buf, sizeof buf, "%g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, -step_exponent), v);
  }
  return buf;
}

// Widens an empty range so that a single point or a constant series has room.
void pad_range(double& lo, double& hi, double pad_if_zero) {
  if (hi > lo) return;
  const double d = lo == 0 ? pad_if_zero : std::abs(lo) * 0.1;
  lo -= d;
  hi += d;
}

struct Axis {
  double lo, hi;                  // in plotted units (log10 of the data on a log axis)
  std::vector<double> ticks;      // in plotted units
  std::vector<std::string> labels;
};

// Multiples of a nice step covering [lo, hi] (padded when empty), and the step.
std::pair<std::vector<double>, NiceStep> ticks_and_step(double lo, double hi, int target) {
  pad_range(lo, hi, 1.0);
  LOOM_CHECK(std::isfinite(hi - lo), ValueError, "write_svg: values too large to plot: [", lo, ", ", hi, "]");
  const NiceStep step = nice_step(hi - lo, target);
  const long long first = static_cast<long long>(std::floor(lo / step.value() + 1e-9));
  const long long last = static_cast<long long>(std::ceil(hi / step.value() - 1e-9));
  std::vector<double> ticks;
  for (long long k = first; k <= last; ++k) ticks.push_back(step.times(k));
  return {ticks, step};
}

Axis linear_axis(double lo, double hi) {
  auto [ticks, step] = ticks_and_step(lo, hi, 5);
  Axis a{ticks.front(), ticks.back(), ticks, {}};
  for (double t : ticks) a.labels.push_back(tick_label(t, step.e));
  return a;
}

std::string power_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// lo and hi are log10 of the data; ticks are whole decades, or 1, 2 and 5 times them where
// the data spans at most two decades (whole decades would leave it a strip of the chart).
Axis log_axis(double lo, double hi) {
  pad_range(lo, hi, 0.5);
  if (hi - lo < 1e-12) {  // pad_range's 10% of a small log10 can vanish
    lo -= 0.5;
    hi += 0.5;
  }
  Axis a;
  if (hi - lo <= 2) {
    // From the last mark at or below lo to the first at or above hi.
    for (long long k = static_cast<long long>(std::floor(lo)); a.ticks.empty() || a.ticks.back() < hi - 1e-9; ++k) {
      for (int m : {1, 2, 5}) {
        const double t = static_cast<double>(k) + std::log10(static_cast<double>(m));
        if (!a.ticks.empty() && a.ticks.back() >= hi - 1e-9) break;
        if (t <= lo + 1e-9) a.ticks.clear(), a.labels.clear();
        a.ticks.push_back(t);
        a.labels.push_back(power_label(m * std::pow(10.0, static_cast<double>(k))));
      }
    }
    a.lo = a.ticks.front();
    a.hi = a.ticks.back();
    return a;
  }
  const long long first = static_cast<long long>(std::floor(lo));
  long long last = static_cast<long long>(std::ceil(hi));
  const long long every = std::max(1LL, (last - first + 7) / 8);  // at most about 8 labels
  last = first + (last - first + every - 1) / every * every;
  for (long long k = first; k <= last; k += every) {
    a.ticks.push_back(static_cast<double>(k));
    a.labels.push_back(power_label(std::pow(10.0, static_cast<double>(k))));
  }
  a.lo = a.ticks.front();
  a.hi = a.ticks.back();
  return a;
}

bool contains_lowercase(const std::string& s, const std::string& word) {
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find(word) != std::string::npos;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  LOOM_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, ValueError,
             "nice_ticks: need finite lo <= hi, got [", lo, ", ", hi, "]");
  LOOM_CHECK(target >= 1, ValueError, "nice_ticks: target must be >= 1, got ", target);
  return ticks_and_step(lo, hi, target).first;
}

std::string render_svg(const std::vector<Series>& series, const PlotOptions& options) {
  LOOM_CHECK(!series.empty(), ValueError, "write_svg: no series to plot");
  for (const Series& s : series) {
    LOOM_CHECK(s.x.size() == s.y.size(), ValueError, "write_svg: series '", s.name, "' has ", s.x.size(),
               " x values but ", s.y.size(), " y values");
  }
  LOOM_CHECK(options.width >= 240 && options.width <= 10000 && options.height >= 160 && options.height <= 10000,
             ValueError, "write_svg: size must be between 240x160 and 10000x10000 pixels, got ", options.width, "x",
             options.height);

  // A point is drawn when finite (and positive on a log axis); px, py are in plotted units.
  auto plotted = [&](double x, double y, double& px, double& py) {
    if (!std::isfinite(x) || !std::isfinite(y) || (options.log_x && x <= 0) || (options.log_y && y <= 0)) return false;
    px = options.log_x ? std::log10(x) : x;
    py = options.log_y ? std::log10(y) : y;
    return true;
  };
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      double px, py;
      if (!plotted(s.x[i], s.y[i], px, py)) continue;
      x_lo = std::min(x_lo, px);
      x_hi = std::max(x_hi, px);
      y_lo = std::min(y_lo, py);
      y_hi = std::max(y_hi, py);
    }
  }
  if (x_lo > x_hi) x_lo = 0, x_hi = 1;  // nothing drawable: an empty frame
  if (y_lo > y_hi) y_lo = 0, y_hi = 1;
  const Axis xa = options.log_x ? log_axis(x_lo, x_hi) : linear_axis(x_lo, x_hi);
  const Axis ya = options.log_y ? log_axis(y_lo, y_hi) : linear_axis(y_lo, y_hi);

  // Layout: title on top, tick labels and axis labels left and below, legend on the right.
  size_t longest_name = 0;
  for (const Series& s : series) longest_name = std::max(longest_name, s.name.size());
  const double W = options.width, H = options.height;
  const double legend_w = std::min(W * 0.3, 40.0 + 7.0 * static_cast<double>(longest_name));
  const double left = 75, right = W - legend_w - 15, top = 40, bottom = H - 50;
  auto px = [&](double x) { return left + (x - xa.lo) / (xa.hi - xa.lo) * (right - left); };
  auto py = [&](double y) { return bottom - (y - ya.lo) / (ya.hi - ya.lo) * (bottom - top); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << options.width << "\" height=\"" << options.height
    << "\" viewBox=\"0 0 " << options.width << ' ' << options.height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty()) {
    o << "<text class=\"title\" x=\"" << fmt((left + right) / 2) << "\" y=\"24\" text-anchor=\"middle\" "
      << "font-size=\"15\">" << xml_escape(options.title) << "</text>\n";
  }

  o << "<g class=\"x-ticks\">\n";
  for (size_t i = 0; i < xa.ticks.size(); ++i) {
    const std::string x = fmt(px(xa.ticks[i]));
    o << "<line x1=\"" << x << "\" y1=\"" << fmt(top) << "\" x2=\"" << x << "\" y2=\"" << fmt(bottom)
      << "\" stroke=\"#e0e0e0\"/>"
      << "<text class=\"tick\" x=\"" << x << "\" y=\"" << fmt(bottom + 16) << "\" text-anchor=\"middle\">"
      << xa.labels[i] << "</text>\n";
  }
  o << "</g>\n<g class=\"y-ticks\">\n";
  for (size_t i = 0; i < ya.ticks.size(); ++i) {
    const std::string y = fmt(py(ya.ticks[i]));
    o << "<line x1=\"" << fmt(left) << "\" y1=\"" << y << "\" x2=\"" << fmt(right) << "\" y2=\"" << y
      << "\" stroke=\"#e0e0e0\"/>"
      << "<text class=\"tick\" x=\"" << fmt(left - 6) << "\" y=\"" << fmt(py(ya.ticks[i]) + 4)
      << "\" text-anchor=\"end\">" << ya.labels[i] << "</text>\n";
  }
  o << "</g>\n";
  o << "<rect x=\"" << fmt(left) << "\" y=\"" << fmt(top) << "\" width=\"" << fmt(right - left) << "\" height=\""
    << fmt(bottom - top) << "\" fill=\"none\" stroke=\"black\"/>\n";
  if (!options.x_label.empty()) {
    o << "<text class=\"x-label\" x=\"" << fmt((left + right) / 2) << "\" y=\"" << fmt(H - 12)
      << "\" text-anchor=\"middle\">" << xml_escape(options.x_label) << "</text>\n";
  }
  if (!options.y_label.empty()) {
    o << "<text class=\"y-label\" transform=\"translate(16," << fmt((top + bottom) / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(options.y_label) << "</text>\n";
  }

  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    const std::string colour = kColours[si % kNumColours];
    const std::string dash = si >= kNumColours ? " stroke-dasharray=\"6 3\"" : "";
    // Split into runs of drawable points: a NaN (or a y <= 0 on a log axis) breaks the line.
    std::vector<std::vector<std::pair<double, double>>> runs(1);
    size_t drawable = 0;
    for (size_t i = 0; i < s.x.size(); ++i) {
      double x, y;
      if (plotted(s.x[i], s.y[i], x, y)) {
        runs.back().emplace_back(px(x), py(y));
        ++drawable;
      } else if (!runs.back().empty()) {
        runs.emplace_back();
      }
    }
    o << "<g class=\"series\" data-name=\"" << xml_escape(s.name) << "\">\n";
    for (const auto& run : runs) {
      if (run.size() >= 2) {
        o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash << " points=\"";
        for (size_t i = 0; i < run.size(); ++i) o << (i ? " " : "") << fmt(run[i].first) << ',' << fmt(run[i].second);
        o << "\"/>\n";
      }
      // A lone point has no line to show it; short series get a dot on every point.
      if (run.size() == 1 || drawable <= kMaxMarkedPoints) {
        for (const auto& [x, y] : run) {
          o << "<circle cx=\"" << fmt(x) << "\" cy=\"" << fmt(y) << "\" r=\"3\" fill=\"" << colour << "\"/>\n";
        }
      }
    }
    o << "</g>\n";
  }

  // Names longer than the legend column (about 7 px a character) are cut.
  const size_t legend_chars = std::max<size_t>(4, static_cast<size_t>((legend_w - 40) / 7));
  o << "<g class=\"legend\">\n";
  for (size_t si = 0; si < series.size(); ++si) {
    const double y = top + 10 + 18.0 * static_cast<double>(si);
    const std::string dash = si >= kNumColours ? " stroke-dasharray=\"6 3\"" : "";
    o << "<line x1=\"" << fmt(right + 10) << "\" y1=\"" << fmt(y) << "\" x2=\"" << fmt(right + 30) << "\" y2=\""
      << fmt(y) << "\" stroke=\"" << kColours[si % kNumColours] << "\" stroke-width=\"2\"" << dash << "/>"
      << "<text x=\"" << fmt(right + 35) << "\" y=\"" << fmt(y + 4) << "\">" << xml_escape(shorten(series[si].name, legend_chars))
      << "</text>\n";
  }
  o << "</g>\n</svg>\n";
  return o.str();
}

void write_svg(const std::string& path, const std::vector<Series>& series, const PlotOptions& options) {
  const std::string svg = render_svg(series, options);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << svg;
  out.flush();
  if (!out) {
    throw SerializationError("write_svg: cannot write '" + path + "': " + (errno ? std::strerror(errno) : "unknown error"));
  }
}

std::vector<std::string> write_training_curves(const std::string& path_prefix, const MetricsLog& log) {
  struct Chart {
    std::string word, suffix, label;
  };
  std::vector<std::string> written;
  for (const Chart& chart : {Chart{"loss", "_loss.svg", "loss"}, Chart{"acc", "_accuracy.svg", "accuracy"}}) {
    std::vector<Series> series;
    for (const std::string& key : log.epoch_keys()) {
      if (!contains_lowercase(key, chart.word)) continue;
      Series s{key, {}, {}};
      for (const Row& row : log.epochs()) {
        s.x.push_back(static_cast<double>(row.epoch));
        s.y.push_back(row.get(key).value_or(std::numeric_limits<double>::quiet_NaN()));
      }
      series.push_back(std::move(s));
    }
    if (series.empty()) continue;
    const std::string path = path_prefix + chart.suffix;
    write_svg(path, series, {.title = log.name() + " " + chart.label, .x_label = "epoch", .y_label = chart.label});
    written.push_back(path);
  }
  return written;
}

}  // namespace loom::train
