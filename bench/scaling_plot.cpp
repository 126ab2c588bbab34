// The report of bench/scaling.sh: reads the JSON lines of loom-bench and torch_workloads.py
// (one line per framework, dtype and shape), draws ms per step against sequence length (at
// the fixed batch) and against batch (at the fixed sequence length) as two log-log SVG charts
// with Loom's own plotting code (train/metrics/plot.h), one line per framework x dtype, and
// prints the table of both, with peer / loom where both ran the same point.
//
//   scaling_plot --in FILE --out DIR --batch B --seq-len T
//
// Writes DIR/scaling_seq.svg and DIR/scaling_batch.svg. Lines it cannot read are an error:
// the input is the script's own output.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/metrics/plot.h"

namespace {

// The value of "key" in a flat JSON object on one line: a string's characters or a number's
// text ("" where absent). Enough for the lines of the two benchmarks, which nest nothing.
std::string field(const std::string& line, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  size_t at = line.find(quoted);
  if (at == std::string::npos) return "";
  at += quoted.size();
  while (at < line.size() && line[at] == ' ') ++at;
  if (at < line.size() && line[at] == '"') {
    const size_t end = line.find('"', at + 1);
    return line.substr(at + 1, end - at - 1);
  }
  const size_t end = line.find_first_of(",}", at);
  return line.substr(at, end - at);
}

struct Point {
  std::string series;  // "loom fp32", "pytorch-2.15.0 bf16", ...
  long batch, seq;
  double ms;
};

std::vector<Point> read_points(const std::string& path) {
  std::ifstream in(path);
  LOOM_CHECK(in, loom::ValueError, "scaling_plot: cannot read ", path);
  std::vector<Point> points;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::string framework = field(line, "framework");
    framework = framework.substr(0, framework.find('+'));  // "pytorch-2.15.0+cu132" -> "pytorch-2.15.0"
    const std::string amp = field(line, "amp"), batch = field(line, "batch"), seq = field(line, "seq_len"),
                      ms = field(line, "ms_per_step");
    LOOM_CHECK(!framework.empty() && !batch.empty() && !seq.empty() && !ms.empty(), loom::ValueError,
               "scaling_plot: a line without framework, batch, seq_len or ms_per_step: ", line);
    points.push_back({framework + (amp == "bf16" ? " bf16" : amp == "off" || amp.empty() ? " fp32" : " " + amp),
                      std::atol(batch.c_str()), std::atol(seq.c_str()), std::atof(ms.c_str())});
  }
  return points;
}

// One series per framework x dtype, by name (the same colours in both charts): ms per step against `x_of` over
// the points where `fixed` holds, in increasing x.
template <typename Fixed, typename X>
std::vector<loom::train::Series> series_of(std::vector<Point> points, Fixed fixed, X x_of) {
  std::stable_sort(points.begin(), points.end(), [&](const Point& a, const Point& b) { return x_of(a) < x_of(b); });
  std::map<std::string, loom::train::Series> by_name;
  for (const Point& p : points) {
    if (!fixed(p)) continue;
    loom::train::Series& s = by_name[p.series];
    s.name = p.series;
    s.x.push_back(double(x_of(p)));
    s.y.push_back(p.ms);
  }
  std::vector<loom::train::Series> out;
  for (auto& [name, s] : by_name) out.push_back(std::move(s));
  return out;
}

// ms per step of every series at each (batch, seq), and peer / loom of the same dtype.
void print_table(const std::vector<Point>& points) {
  std::map<std::pair<long, long>, std::map<std::string, double>> at;
  std::vector<std::string> names;
  for (const Point& p : points) {
    at[{p.batch, p.seq}][p.series] = p.ms;
    bool seen = false;
    for (const std::string& n : names) seen |= n == p.series;
    if (!seen) names.push_back(p.series);
  }
  std::printf("%6s %6s", "batch", "seq");
  for (const std::string& n : names) std::printf(" %20s", (n + " ms").c_str());
  std::printf("  peer/loom\n");
  for (const auto& [shape, ms] : at) {
    std::printf("%6ld %6ld", shape.first, shape.second);
    for (const std::string& n : names) {
      auto it = ms.find(n);
      if (it == ms.end()) std::printf(" %20s", "-");
      else std::printf(" %20.1f", it->second);
    }
    // Each peer series against Loom's of the same dtype: "bf16 1.23x" (> 1: Loom is faster).
    for (const auto& [name, value] : ms) {
      const std::string dtype = name.substr(name.rfind(' ') + 1);
      auto loom = ms.find("loom " + dtype);
      if (name.rfind("loom ", 0) != 0 && loom != ms.end()) std::printf("  %s %.2fx", dtype.c_str(), value / loom->second);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string in, out;
  long batch = 0, seq = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--in") in = argv[i + 1];
    else if (flag == "--out") out = argv[i + 1];
    else if (flag == "--batch") batch = std::atol(argv[i + 1]);
    else if (flag == "--seq-len") seq = std::atol(argv[i + 1]);
    else in.clear(), i = argc;  // unknown: usage below
  }
  if (in.empty() || out.empty() || batch < 1 || seq < 1 || argc % 2 == 0) {
    std::fprintf(stderr, "usage: %s --in FILE --out DIR --batch B --seq-len T\n", argv[0]);
    return 2;
  }
  try {
    const std::vector<Point> points = read_points(in);
    using loom::train::write_svg;
    write_svg(out + "/scaling_seq.svg",
              series_of(points, [&](const Point& p) { return p.batch == batch; }, [](const Point& p) { return p.seq; }),
              {.title = "lstm-sentiment, batch " + std::to_string(batch), .x_label = "sequence length",
               .y_label = "ms per training step", .log_x = true, .log_y = true});
    write_svg(out + "/scaling_batch.svg",
              series_of(points, [&](const Point& p) { return p.seq == seq; }, [](const Point& p) { return p.batch; }),
              {.title = "lstm-sentiment, sequence length " + std::to_string(seq), .x_label = "batch",
               .y_label = "ms per training step", .log_x = true, .log_y = true});
    print_table(points);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
