// Watching training (train/train.h): the progress line against hand-derived strings under
// a fake clock, the metrics files read back (exact header and rows, bit-exact numbers,
// NaN handling, typed errors), the SVG charts' structure and ticks, and the run summary.
#include "catch2_compat.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/cuda.h"
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "fake_clock.h"
#include "test_util.h"
#include "train/train.h"

using namespace loom;
using namespace loom::train;
using loom::test::require_throws_with;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using loom::test::FakeClock;
using loom::test::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}


}  // namespace

// ---- progress bar ----------------------------------------------------------------------------------

TEST_CASE("train watch: count, duration and value formatting", "[train]") {
  CHECK(format_count(512) == "512");
  CHECK(format_count(3.5) == "3.50");
  CHECK(format_count(45.04) == "45.0");
  CHECK(format_count(12345) == "12.3k");
  CHECK(format_count(999.6) == "1.00k");  // not "1000"
  CHECK(format_count(1.28e6) == "1.28M");
  CHECK(format_count(7.5e9) == "7.50G");
  CHECK(format_duration(9.9) == "00:09");
  CHECK(format_duration(3599) == "59:59");
  CHECK(format_duration(3725) == "1:02:05");
  CHECK(format_duration(-1) == "00:00");
  CHECK(format_duration(kNaN) == "00:00");
  CHECK(format_value(0.43214) == "0.4321");
  CHECK(format_value(0.81) == "0.81");
  CHECK(format_value(12345.6) == "1.235e+04");
  CHECK(format_value(-kNaN) == "nan");
}

TEST_CASE("train watch: plain progress lines come every interval and at close", "[train]") {
  std::ostringstream os;
  FakeClock t;
  ProgressOptions o;
  o.out = &os;
  o.plain_interval_s = 10;
  o.item_name = "tokens";
  o.clock = t.clock();
  {
    ProgressBar bar("epoch 1/2", 100, o);
    REQUIRE_FALSE(bar.interactive());  // an ostringstream is never a terminal
    CHECK(os.str().empty());
    // 100 steps of 0.5 s and 1000 tokens each; the postfix changes every 10 steps and is
    // kept in between.
    for (int i = 1; i <= 100; ++i) {
      t.now = i * 0.5;
      if (i % 10 == 5) {
        bar.update(1, {{"loss", 1.0 / i}, {"acc", i / 100.0}}, 1000);
      } else {
        bar.update(1, {}, 1000);
      }
    }
    CHECK(bar.steps_done() == 100);
    CHECK(bar.items_done() == 100000);
    t.now = 52;
    bar.close();
    bar.close();  // idempotent, and so is the destructor's
    REQUIRE_THROWS_AS(bar.update(), ValueError);
  }
  // Every 10 s: rate 1000 tokens / 0.5 s, ETA = elapsed / done * remaining.
  const std::vector<std::string> expected = {
      "epoch 1/2 20/100 loss=0.06667 acc=0.15 2.00k tokens/s elapsed 00:10 eta 00:40",
      "epoch 1/2 40/100 loss=0.02857 acc=0.35 2.00k tokens/s elapsed 00:20 eta 00:30",
      "epoch 1/2 60/100 loss=0.01818 acc=0.55 2.00k tokens/s elapsed 00:30 eta 00:20",
      "epoch 1/2 80/100 loss=0.01333 acc=0.75 2.00k tokens/s elapsed 00:40 eta 00:10",
      "epoch 1/2 100/100 loss=0.01053 acc=0.95 2.00k tokens/s elapsed 00:50 eta 00:00",
      // close at 52 s: 100000 / 52 = 1923 tokens/s
      "epoch 1/2 100/100 loss=0.01053 acc=0.95 1.92k tokens/s elapsed 00:52 total 100k tokens",
  };
  CHECK(split_lines(os.str()) == expected);
  CHECK(os.str().back() == '\n');
  CHECK(os.str().find('\r') == std::string::npos);
  CHECK(os.str().find('\x1b') == std::string::npos);
}

TEST_CASE("train watch: plain progress with unknown total counts steps per second", "[train]") {
  std::ostringstream os;
  FakeClock t;
  ProgressOptions o;
  o.out = &os;
  o.plain_interval_s = 1;
  o.clock = t.clock();
  ProgressBar bar("", 0, o);
  t.now = 0.5;
  bar.update();  // under the interval: nothing
  CHECK(os.str().empty());
  t.now = 2;
  bar.update();
  CHECK(os.str() == "2 1.00 steps/s elapsed 00:02\n");
  CHECK(bar.line() == "2 1.00 steps/s elapsed 00:02");

  ProgressOptions bad;
  bad.min_interval_s = -1;
  require_throws_with<ValueError>([&] { ProgressBar("x", 1, bad); }, {"min_interval_s"});
  bad = {};
  bad.plain_interval_s = kNaN;
  require_throws_with<ValueError>([&] { ProgressBar("x", 1, bad); }, {"plain_interval_s"});
  bad = {};
  bad.out = nullptr;
  require_throws_with<ValueError>([&] { ProgressBar("x", 1, bad); }, {"out"});
}

TEST_CASE("train watch: interactive progress redraws in place, throttled", "[train]") {
  std::ostringstream os;
  FakeClock t;
  ProgressOptions o;
  o.out = &os;
  o.interactive = true;
  o.min_interval_s = 0.1;
  o.bar_width = 10;
  o.clock = t.clock();
  ProgressBar bar("train", 4, o);
  const std::string l0 = "train [..........] 0/4 elapsed 00:00 eta ?";
  CHECK(os.str() == "\r" + l0);
  t.now = 0.05;
  bar.update();  // 0.05 s after the last draw: throttled
  CHECK(os.str() == "\r" + l0);
  t.now = 0.2;
  bar.update(1, {{"loss", 1.5}});
  const std::string l1 = "train [#####.....] 2/4 loss=1.5 10.0 steps/s elapsed 00:00 eta 00:00";
  t.now = 0.25;
  bar.update();  // throttled
  t.now = 0.5;
  bar.update();
  const std::string l2 = "train [##########] 4/4 loss=1.5 8.00 steps/s elapsed 00:00 eta 00:00";
  bar.close();
  // The final line drops " eta 00:00" (10 characters), so 10 spaces erase what is left of l2.
  const std::string l3 = "train [##########] 4/4 loss=1.5 8.00 steps/s elapsed 00:00";
  CHECK(os.str() == "\r" + l0 + "\r" + l1 + "\r" + l2 + "\r" + l3 + std::string(10, ' ') + "\n");
  CHECK(count(os.str(), "\r") == 4);  // 1 initial + 2 of 4 updates + close
}

// ---- metrics log -----------------------------------------------------------------------------------

TEST_CASE("train watch: metrics log writes exact CSV and JSONL and keeps rows", "[train]") {
  TempDir tmp;
  const std::string dir = tmp.file("runs/nested");  // created
  FakeClock t;
  t.now = 100;
  MetricsLog log(dir, "run", t.clock());
  t.now = 100.5;
  log.log_step(1, 1, {{"loss", 0.1}, {"lr", 1e-3}});
  t.now = 101.25;
  log.log_step(1, 2, {{"loss", 1.0 / 3.0}, {"lr", 1e-3}});
  t.now = 102;
  log.log_epoch(1, {{"train_loss", 0.2}, {"val_acc", kNaN}});
  t.now = 103;
  log.log_epoch(2, {{"train_loss", kInf}, {"val_acc", 0.75}});

  // Read while the log is open: log_epoch flushed everything.
  CHECK(read_text(dir + "/run_steps.csv") ==
        "epoch,step,time_s,loss,lr\n"
        "1,1,0.5,0.1,0.001\n"
        "1,2,1.25,0.3333333333333333,0.001\n");
  CHECK(read_text(dir + "/run_epochs.csv") ==
        "epoch,time_s,train_loss,val_acc\n"
        "1,2,0.2,nan\n"
        "2,3,inf,0.75\n");

  std::vector<std::string> steps = split_lines(read_text(dir + "/run_steps.jsonl"));
  REQUIRE(steps.size() == 2);
  nlohmann::json s1 = nlohmann::json::parse(steps[1]);
  CHECK(s1["epoch"] == 1);
  CHECK(s1["step"] == 2);
  CHECK(s1["time_s"].get<double>() == 1.25);
  CHECK(s1["loss"].get<double>() == 1.0 / 3.0);
  CHECK(s1["lr"].get<double>() == 1e-3);
  CHECK(steps[1].find("\"epoch\"") < steps[1].find("\"loss\""));  // column order kept

  std::vector<std::string> epochs = split_lines(read_text(dir + "/run_epochs.jsonl"));
  REQUIRE(epochs.size() == 2);
  nlohmann::json e1 = nlohmann::json::parse(epochs[0]), e2 = nlohmann::json::parse(epochs[1]);
  CHECK_FALSE(e1.contains("step"));
  CHECK(e1["train_loss"].get<double>() == 0.2);
  CHECK(e1["val_acc"].is_null());  // NaN
  CHECK(e2["train_loss"].is_null());  // inf
  CHECK(e2["val_acc"].get<double>() == 0.75);

  // In memory.
  REQUIRE(log.epochs().size() == 2);
  REQUIRE(log.steps().size() == 2);
  CHECK(log.steps()[1].step == 2);
  CHECK(log.steps()[1].time_s == 1.25);
  CHECK(std::isnan(*log.epochs()[0].get("val_acc")));
  CHECK(log.epochs()[1].get("val_acc") == 0.75);
  CHECK_FALSE(log.epochs()[1].get("loss").has_value());
  CHECK(log.step_keys() == std::vector<std::string>{"loss", "lr"});
  CHECK(log.epoch_keys() == std::vector<std::string>{"train_loss", "val_acc"});
  for (const std::string& p : log.paths()) CHECK(fs::exists(p));
}

TEST_CASE("train watch: metrics log numbers read back bit-identically", "[train]") {
  TempDir tmp;
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-300, 300);
  std::vector<std::pair<double, double>> logged;
  {
    MetricsLog log(tmp.path.string(), "rt");
    for (size_t step = 0; step < 50; ++step) {
      const double a = mantissa(rng) * std::pow(10.0, exponent(rng)), b = mantissa(rng);
      logged.emplace_back(a, b);
      log.log_step(0, step, {{"a", a}, {"b", b}});
    }
  }  // closed: flushed
  std::vector<std::string> csv = split_lines(read_text(tmp.file("rt_steps.csv")));
  std::vector<std::string> jsonl = split_lines(read_text(tmp.file("rt_steps.jsonl")));
  REQUIRE(csv.size() == logged.size() + 1);
  REQUIRE(jsonl.size() == logged.size());
  for (size_t i = 0; i < logged.size(); ++i) {
    // epoch,step,time_s,a,b
    std::vector<std::string> cells;
    std::stringstream row(csv[i + 1]);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    REQUIRE(cells.size() == 5);
    CHECK(std::strtod(cells[3].c_str(), nullptr) == logged[i].first);
    CHECK(std::strtod(cells[4].c_str(), nullptr) == logged[i].second);
    nlohmann::json j = nlohmann::json::parse(jsonl[i]);
    CHECK(j["a"].get<double>() == logged[i].first);
    CHECK(j["b"].get<double>() == logged[i].second);
  }
}

TEST_CASE("train watch: metrics log rejects changed keys and bad names", "[train]") {
  TempDir tmp;
  MetricsLog log(tmp.path.string(), "run");
  log.log_step(1, 1, {{"loss", 0.5}, {"lr", 0.1}});
  require_throws_with<ValueError>([&] { log.log_step(1, 2, {{"loss", 0.4}}); },
                                  {"run", "expected keys [loss, lr]", "given [loss]", "columns"});
  require_throws_with<ValueError>([&] { log.log_step(1, 2, {{"lr", 0.1}, {"loss", 0.4}}); },
                                  {"expected keys [loss, lr]", "given [lr, loss]"});
  require_throws_with<ValueError>([&] { log.log_epoch(1, {{"a,b", 1}}); }, {"'a,b'", "CSV"});
  require_throws_with<ValueError>([&] { log.log_epoch(1, {{"", 1}}); }, {"non-empty"});
  require_throws_with<ValueError>([&] { log.log_epoch(1, {{"time_s", 1}}); }, {"time_s"});
  require_throws_with<ValueError>([&] { log.log_epoch(1, {{"x", 1}, {"x", 2}}); }, {"'x'", "twice"});
  log.flush();
  // Nothing of the rejected rows reached the files.
  const std::vector<std::string> rows = split_lines(read_text(tmp.file("run_steps.csv")));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == "epoch,step,time_s,loss,lr");
  CHECK(rows[1].rfind("1,1,", 0) == 0);
  CHECK(read_text(tmp.file("run_epochs.csv")).empty());
  CHECK(log.steps().size() == 1);
  CHECK(log.epochs().empty());

  require_throws_with<ValueError>([&] { MetricsLog(tmp.path.string(), "a/b"); }, {"'a/b'"});
  require_throws_with<ValueError>([&] { MetricsLog(tmp.path.string(), ""); }, {"run name"});
}

TEST_CASE("train watch: metrics log in an unwritable place is a SerializationError", "[train]") {
  TempDir tmp;
  std::ofstream(tmp.file("blocker")) << "a file, not a directory";
  const std::string under_file = tmp.file("blocker") + "/logs";
  require_throws_with<SerializationError>([&] { MetricsLog(under_file, "run"); },
                                          {under_file, std::strerror(ENOTDIR)});
  // The directory is fine but one of the files is taken by a directory.
  fs::create_directory(tmp.file("run_steps.csv"));
  require_throws_with<SerializationError>([&] { MetricsLog(tmp.path.string(), "run"); },
                                          {tmp.file("run_steps.csv"), std::strerror(EISDIR)});
}

// ---- plots -----------------------------------------------------------------------------------------

namespace {

// The points="x,y x,y ..." attribute of every polyline, parsed.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    const size_t begin = svg.find("points=\"", at) + 8, end = svg.find('"', begin);
    std::istringstream in(svg.substr(begin, end - begin));
    out.emplace_back();
    for (std::string pair; in >> pair;) {
      const size_t comma = pair.find(',');
      out.back().emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    }
  }
  return out;
}

// The text of every tick label inside <g class="<group>">.
std::vector<std::string> tick_labels(const std::string& svg, const std::string& group) {
  const size_t begin = svg.find("<g class=\"" + group + "\">"), end = svg.find("</g>", begin);
  REQUIRE(begin != std::string::npos);
  std::vector<std::string> labels;
  for (size_t at = svg.find("class=\"tick\"", begin); at < end; at = svg.find("class=\"tick\"", at + 1)) {
    const size_t open = svg.find('>', at) + 1;
    labels.push_back(svg.substr(open, svg.find('<', open) - open));
  }
  return labels;
}

// The plot frame: the black-stroked rect (x, y, width, height).
std::vector<double> frame(const std::string& svg) {
  const size_t end = svg.find("fill=\"none\" stroke=\"black\"");
  const size_t at = svg.rfind("<rect", end);
  std::vector<double> v;
  for (const char* attr : {"x=\"", "y=\"", "width=\"", "height=\""}) {
    const size_t p = svg.find(attr, at) + std::strlen(attr);
    v.push_back(std::stod(svg.substr(p)));
  }
  return v;
}

}  // namespace

TEST_CASE("train watch: nice ticks are 1/2/5 steps covering the range", "[train]") {
  CHECK(nice_ticks(0, 1) == std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0});
  CHECK(nice_ticks(-3.7, 12.1) == std::vector<double>{-5, 0, 5, 10, 15});
  CHECK(nice_ticks(0.001, 0.0042) == std::vector<double>{0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035, 0.004, 0.0045});
  CHECK(nice_ticks(3, 3) == std::vector<double>{2.7, 2.8, 2.9, 3.0, 3.1, 3.2, 3.3});  // padded by 10%
  REQUIRE_THROWS_AS(nice_ticks(2, 1), ValueError);
  REQUIRE_THROWS_AS(nice_ticks(0, kInf), ValueError);

  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> e(-8, 8);
  for (int trial = 0; trial < 500; ++trial) {
    const double scale = std::pow(10.0, e(rng));
    double lo = u(rng) * scale, hi = u(rng) * scale;
    if (lo > hi) std::swap(lo, hi);
    std::vector<double> t = nice_ticks(lo, hi);
    INFO("lo " << lo << " hi " << hi);
    REQUIRE(t.size() >= 3);
    REQUIRE(t.size() <= 12);
    CHECK(t.front() <= lo);
    CHECK(t.back() >= hi);
    const double step = t[1] - t[0];
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    CHECK((std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 || std::abs(mantissa - 5) < 1e-6));
    for (size_t i = 1; i < t.size(); ++i) CHECK(std::abs((t[i] - t[i - 1]) - step) <= 1e-9 * step);
  }
}

TEST_CASE("train watch: SVG line chart structure, ticks, legend, escaping and NaN breaks", "[train]") {
  TempDir tmp;
  const std::string path = tmp.file("loss.svg");
  std::vector<Series> series = {
      {"train <loss>", {1, 2, 3, 4}, {1.0, 0.6, 0.4, 0.3}},
      {"val & co", {1, 2, 3, 4, 5}, {1.1, 0.7, kNaN, 0.5, 0.45}},  // NaN: two pieces
  };
  write_svg(path, series, {.title = "loss <&> \"quotes\"", .x_label = "epoch", .y_label = "loss"});
  const std::string svg = read_text(path);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.size() >= 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(svg == render_svg(series, {.title = "loss <&> \"quotes\"", .x_label = "epoch", .y_label = "loss"}));

  // Escaped text only.
  CHECK(svg.find("loss &lt;&amp;&gt; &quot;quotes&quot;") != std::string::npos);
  CHECK(count(svg, "train &lt;loss&gt;") == 2);  // the series' data-name and the legend
  CHECK(count(svg, "val &amp; co") == 2);
  CHECK(svg.find("train <loss>") == std::string::npos);
  CHECK(svg.find("val & co") == std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);

  // About 5 ticks: x spans 1..5 (4 / 5 = 0.8 -> step 1), y spans 0.3..1.1 (0.8 / 5 = 0.16
  // -> step 0.2, widened to 0.2..1.2).
  CHECK(tick_labels(svg, "x-ticks") == std::vector<std::string>{"1", "2", "3", "4", "5"});
  CHECK(tick_labels(svg, "y-ticks") == std::vector<std::string>{"0.2", "0.4", "0.6", "0.8", "1.0", "1.2"});

  // One polyline for train, two for val (the NaN breaks it), mapped into the frame by the
  // axis ranges [1, 5] and [0.2, 1.2].
  auto lines = polylines(svg);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].size() == 4);
  CHECK(lines[1].size() == 2);
  CHECK(lines[2].size() == 2);
  const std::vector<double> f = frame(svg);  // x, y, width, height
  auto px = [&](double x) { return f[0] + (x - 1) / 4 * f[2]; };
  auto py = [&](double y) { return f[1] + f[3] - (y - 0.2) / 1.0 * f[3]; };
  const std::vector<std::vector<std::pair<double, double>>> expected = {
      {{1, 1.0}, {2, 0.6}, {3, 0.4}, {4, 0.3}}, {{1, 1.1}, {2, 0.7}}, {{4, 0.5}, {5, 0.45}}};
  for (size_t l = 0; l < expected.size(); ++l) {
    for (size_t i = 0; i < expected[l].size(); ++i) {
      CHECK(lines[l][i].first == Approx(px(expected[l][i].first)).margin(0.006));
      CHECK(lines[l][i].second == Approx(py(expected[l][i].second)).margin(0.006));
    }
  }
  // Distinct colours.
  CHECK(svg.find("stroke=\"#1f77b4\" stroke-width=\"2\" points=") != std::string::npos);
  CHECK(svg.find("stroke=\"#ff7f0e\" stroke-width=\"2\" points=") != std::string::npos);
}

TEST_CASE("train watch: SVG of a single point, a constant series and a log axis", "[train]") {
  const std::string single = render_svg({{"p", {5}, {2}}});
  CHECK(count(single, "<polyline") == 0);
  CHECK(count(single, "<circle") == 1);  // a lone point is a dot
  CHECK(single.find("nan") == std::string::npos);
  CHECK(single.find("inf") == std::string::npos);

  const std::string flat = render_svg({{"c", {0, 1, 2}, {3, 3, 3}}});
  auto lines = polylines(flat);
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].size() == 3);
  CHECK(lines[0][0].second == lines[0][2].second);
  CHECK(tick_labels(flat, "y-ticks") == std::vector<std::string>{"2.7", "2.8", "2.9", "3.0", "3.1", "3.2", "3.3"});
  CHECK(flat.find("nan") == std::string::npos);

  // A log axis: the 0 cannot be drawn and ends the line; ticks are decades.
  const std::string log_svg = render_svg({{"l", {0, 1, 2, 3, 4}, {100, 10, 1, 0.1, 0}}}, {.log_y = true});
  lines = polylines(log_svg);
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].size() == 4);
  CHECK(tick_labels(log_svg, "y-ticks") == std::vector<std::string>{"0.1", "1", "10", "100"});
  // Equal ratios are equal distances.
  CHECK(lines[0][1].second - lines[0][0].second == Approx(lines[0][3].second - lines[0][2].second).margin(0.01));

  // A name too long for the legend is cut there, on a character boundary, with "…"; the
  // series keeps its full name.
  std::string long_name;
  for (int i = 0; i < 60; ++i) long_name += "\xC3\xA9";  // é, 2 bytes in UTF-8
  const std::string cut = render_svg({{long_name, {0, 1}, {0, 1}}});
  CHECK(cut.find("data-name=\"" + long_name + "\"") != std::string::npos);
  const size_t ellipsis = cut.find("\xE2\x80\xA6</text>");
  REQUIRE(ellipsis != std::string::npos);
  const size_t text_start = cut.rfind('>', ellipsis) + 1;
  const std::string kept = cut.substr(text_start, ellipsis - text_start);
  CHECK(kept.size() % 2 == 0);
  CHECK(kept.size() >= 8);
  CHECK(kept == long_name.substr(0, kept.size()));

  // Nothing drawable still renders an empty frame.
  CHECK(render_svg({{"empty", {}, {}}}).find("</svg>") != std::string::npos);
}

TEST_CASE("train watch: SVG log-log axes: a power law is straight, short spans tick 1/2/5", "[train]") {
  // ms = x / 6.4: each doubling of x doubles y, so every segment is the same vector.
  const Series power{"p", {64, 128, 256, 512, 1024}, {10, 20, 40, 80, 160}};
  const std::string svg = render_svg({power}, {.log_x = true, .log_y = true});
  auto lines = polylines(svg);
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].size() == 5);
  for (size_t i = 2; i < 5; ++i) {
    CHECK(lines[0][i].first - lines[0][i - 1].first == Approx(lines[0][1].first - lines[0][0].first).margin(0.02));
    CHECK(lines[0][i].second - lines[0][i - 1].second == Approx(lines[0][1].second - lines[0][0].second).margin(0.02));
  }
  // Under two decades: 1, 2 and 5 times powers of ten, from the last at or below the data to
  // the first at or above it.
  CHECK(tick_labels(svg, "x-ticks") == std::vector<std::string>{"50", "100", "200", "500", "1000", "2000"});
  CHECK(tick_labels(svg, "y-ticks") == std::vector<std::string>{"10", "20", "50", "100", "200"});

  // A 0 cannot be drawn on a log x axis and breaks the line there; a linear y is unchanged.
  const std::string broken = render_svg({{"z", {1, 10, 0, 100, 1000}, {1, 2, 3, 4, 5}}}, {.log_x = true});
  lines = polylines(broken);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() == 2);
  CHECK(lines[1].size() == 2);
  CHECK(tick_labels(broken, "x-ticks") == std::vector<std::string>{"1", "10", "100", "1000"});
}

TEST_CASE("train watch: SVG rejects bad input", "[train]") {
  require_throws_with<ValueError>([] { render_svg({}); }, {"no series"});
  require_throws_with<ValueError>([] { render_svg({{"bad", {1, 2, 3}, {1, 2}}}); },
                                  {"'bad'", "3 x values but 2 y values"});
  require_throws_with<ValueError>([] { render_svg({{"s", {1}, {1}}}, {.width = 10}); }, {"10x400"});
  TempDir tmp;
  const std::string path = tmp.file("missing-dir/plot.svg");
  require_throws_with<SerializationError>([&] { write_svg(path, {{"s", {1}, {1}}}); }, {path});
}

TEST_CASE("train watch: training curves from a metrics log", "[train]") {
  TempDir tmp;
  MetricsLog log(tmp.file("logs"), "sent");
  for (size_t epoch = 1; epoch <= 4; ++epoch) {
    const double e = static_cast<double>(epoch);
    log.log_epoch(epoch, {{"train_loss", 1 / e}, {"val_loss", 1.2 / e}, {"val_acc", 0.5 + e / 10}, {"lr", 0.1}});
  }
  const std::string prefix = tmp.file("sent");
  const std::vector<std::string> written = write_training_curves(prefix, log);
  REQUIRE(written == std::vector<std::string>{prefix + "_loss.svg", prefix + "_accuracy.svg"});

  const std::string loss = read_text(written[0]);
  CHECK(count(loss, "<polyline") == 2);
  CHECK(loss.find("data-name=\"train_loss\"") != std::string::npos);
  CHECK(loss.find("data-name=\"val_loss\"") != std::string::npos);
  CHECK(loss.find("sent loss") != std::string::npos);
  CHECK(loss.find("data-name=\"lr\"") == std::string::npos);
  CHECK(polylines(loss)[0].size() == 4);

  const std::string acc = read_text(written[1]);
  CHECK(count(acc, "<polyline") == 1);
  CHECK(acc.find("data-name=\"val_acc\"") != std::string::npos);
  CHECK(acc.find("train_loss") == std::string::npos);

  MetricsLog only_lr(tmp.file("logs"), "lr_only");
  only_lr.log_epoch(1, {{"lr", 0.1}});
  CHECK(write_training_curves(tmp.file("lr_only"), only_lr).empty());
  CHECK_FALSE(fs::exists(tmp.file("lr_only_loss.svg")));
}

// ---- run summary -----------------------------------------------------------------------------------

TEST_CASE("train watch: run summary times epochs with an injected clock", "[train]") {
  FakeClock t;
  RunSummary summary(t.clock());
  const std::vector<std::tuple<double, double, size_t>> epochs = {{1, 4, 30000}, {5, 9, 40000}, {10, 12.5, 25000}};
  for (const auto& [begin, end, items] : epochs) {
    t.now = begin;
    summary.start_epoch();
    t.now = end;
    summary.end_epoch(items);
  }
  summary.set("test_accuracy", 0.8123);
  summary.set("test_loss", 0.45);
  summary.set("test_accuracy", 0.8125);  // replaces, keeps its place
  summary.set_peak_device_memory(size_t{3} << 29, "cuda:0");  // 1.5 GiB
  t.now = 13;

  CHECK(summary.epoch_seconds() == std::vector<double>{3, 4, 2.5});
  CHECK(summary.items() == 95000);
  CHECK(summary.items_per_second() == 10000);  // 95000 / 9.5 s

  const std::string text = summary.format("tokens");
  const std::vector<std::string> lines = split_lines(text);
  REQUIRE(lines.size() == 7);
  CHECK(lines[0] == "  epochs          3");
  CHECK(lines[1] == "  total time      00:13 (13.00 s)");
  CHECK(lines[2] == "  time per epoch  3.17 s mean: 3.00 4.00 2.50 s");  // 9.5 / 3
  CHECK(lines[3] == "  throughput      10.0k tokens/s (95.0k tokens)");
  CHECK(lines[4].rfind("  peak memory     host ", 0) == 0);
  CHECK(lines[4].find(" MiB, cuda:0 1.50 GiB") != std::string::npos);
  CHECK(lines[5] == "  test_accuracy   0.8125");
  CHECK(lines[6] == "  test_loss       0.45");

  nlohmann::json j = nlohmann::json::parse(summary.to_json());
  CHECK(j["epochs"] == 3);
  CHECK(j["epoch_seconds"] == nlohmann::json::array({3.0, 4.0, 2.5}));
  CHECK(j["total_seconds"].get<double>() == 13);
  CHECK(j["items"] == 95000);
  CHECK(j["items_per_second"].get<double>() == 10000);
  CHECK(j["peak_device_memory"]["device"] == "cuda:0");
  CHECK(j["peak_device_memory"]["bytes"] == (size_t{3} << 29));
  CHECK(j["peak_host_memory_bytes"].get<size_t>() > 0);
  CHECK(j["metrics"]["test_accuracy"].get<double>() == 0.8125);

  summary.set("diverged", kNaN);
  CHECK(nlohmann::json::parse(summary.to_json())["metrics"]["diverged"].is_null());
  CHECK(split_lines(summary.format()).back() == "  diverged        nan");
}

TEST_CASE("train watch: run summary without the per-epoch list, and misuse", "[train]") {
  FakeClock t;
  RunSummary summary(t.clock());
  for (int e = 0; e < 11; ++e) {
    summary.start_epoch();
    t.now += 2;
    summary.end_epoch(0);
  }
  const std::vector<std::string> lines = split_lines(summary.format("samples"));
  REQUIRE(lines.size() == 4);  // no throughput line without items
  CHECK(lines[1] == "  total time      00:22 (22.00 s)");
  CHECK(lines[2] == "  time per epoch  2.00 s mean");
  CHECK(nlohmann::json::parse(summary.to_json())["peak_device_memory"].is_null());

  require_throws_with<ValueError>([&] { summary.end_epoch(1); }, {"end_epoch", "start_epoch"});
  summary.start_epoch();
  require_throws_with<ValueError>([&] { summary.start_epoch(); }, {"start_epoch", "twice"});
}

TEST_CASE("train watch: byte formatting and peak host memory", "[train]") {
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(size_t{64} << 20) == "64.0 MiB");
  CHECK(format_bytes(size_t{3} << 29) == "1.50 GiB");

  constexpr size_t kBuffer = size_t{64} << 20;
  std::vector<unsigned char> buffer(kBuffer);
  for (size_t i = 0; i < kBuffer; i += 4096) buffer[i] = static_cast<unsigned char>(i >> 12);  // touch every page
  size_t touched = 0;
  for (size_t i = 0; i < kBuffer; i += 4096) touched += buffer[i] == static_cast<unsigned char>(i >> 12);
  REQUIRE(touched == kBuffer / 4096);
  const size_t peak = RunSummary::peak_host_memory_bytes();
  CHECK(peak >= kBuffer);
  CHECK(peak < (size_t{1} << 40));  // bytes, not KiB counted as bytes twice
}

TEST_CASE("RunSummary::record_device_peak: nothing for the CPU, and a GPU needs one", "[train]") {
  loom::train::RunSummary summary;
  summary.record_device_peak(loom::kCPU);
  CHECK(nlohmann::json::parse(summary.to_json())["peak_device_memory"].is_null());
  if (!loom::cuda::is_available()) CHECK_THROWS_AS(summary.record_device_peak(loom::kCUDA), loom::DeviceError);
}
