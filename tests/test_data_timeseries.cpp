// Tests for data/timeseries.h: the CSV column reader (selection, missing-value policies, bad
// records, the bundled Mauna Loa CO2 file), Normalizer, WindowDataset and collate_windows,
// split_series and the persistence baseline, each against a plain-loop reference.
#include "catch2_compat.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/timeseries.h"
#include "test_util.h"

using namespace loom;
using namespace loom::data;
namespace fs = std::filesystem;
using Missing = CsvColumnsOptions::Missing;

namespace {

using loom::test::message_of;
using loom::test::TempDir;

// Column j of a row-major (N, C) vector.
std::vector<double> column(const std::vector<double>& x, size_t c, size_t j) {
  std::vector<double> out;
  for (size_t i = j; i < x.size(); i += c) out.push_back(x[i]);
  return out;
}

double plain_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double plain_population_std(const std::vector<double>& v) {
  const double m = plain_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}

// A (n, c) float64 series whose columns have different scales and a trend, so the statistics
// of a prefix differ from those of the whole.
Tensor trending_series(int64_t n, int64_t c) {
  Tensor noise = randn({n, c}, kFloat64);
  Tensor t = arange(0, n, 1, kFloat64).unsqueeze(1);
  Tensor scale = from_vector<double>({1.0, 10.0, 0.5, 3.0}, {4}).narrow(0, 0, c);
  return noise * scale + t * 0.1 + 5.0;
}

}  // namespace

// ---- read_csv_columns ----------------------------------------------------------------------------

TEST_CASE("read_csv_columns selects columns by name, in the asked order", "[data][timeseries]") {
  TempDir dir;
  const std::string path =
      dir.write("t.csv", "date,a,b,c\r\n19580329,1.5,-2,3e2\r\n\r\n19580405, 2.5 ,+4,5\r\n");

  ReadReport report;
  NumericTable t = read_csv_columns(path, {.columns = {"c", "a"}}, &report);
  REQUIRE(t.names == std::vector<std::string>{"c", "a"});
  REQUIRE(t.rows() == 2);
  REQUIRE(t.columns[0] == std::vector<double>{300.0, 5.0});
  REQUIRE(t.columns[1] == std::vector<double>{1.5, 2.5});
  CHECK(report.source == path);
  CHECK(report.records == 2);
  CHECK(report.skipped == 0);
  CHECK(t.interpolated == 0);

  Tensor x = t.to_tensor(kFloat64);
  REQUIRE(x.sizes() == Shape{2, 2});
  CHECK(x.to_vector<double>() == std::vector<double>{300.0, 1.5, 5.0, 2.5});
  CHECK(t.to_tensor().dtype() == kFloat32);

  NumericTable all_but_date = read_csv_columns(path, {.skip = {"date"}});
  REQUIRE(all_but_date.names == std::vector<std::string>{"a", "b", "c"});
  CHECK(all_but_date.columns[1] == std::vector<double>{-2.0, 4.0});

  NumericTable everything = read_csv_columns(path);
  REQUIRE(everything.names.size() == 4);
  CHECK(everything.columns[0] == std::vector<double>{19580329.0, 19580405.0});

  const std::string msg =
      message_of<ValueError>([&] { read_csv_columns(path, {.columns = {"a", "nope"}}); });
  CHECK_THAT(msg, Catch::Contains("'nope'") && Catch::Contains("'date', 'a', 'b', 'c'"));
  CHECK_THROWS_AS(read_csv_columns(path, {.skip = {"typo"}}), ValueError);
  CHECK_THROWS_AS(read_csv_columns(path, {.columns = {"a", "a"}}), ValueError);
  CHECK_THROWS_AS(read_csv_columns(path, {.skip = {"date", "a", "b", "c"}}), ValueError);

  // Only the selected columns are parsed: a date column may hold text.
  const std::string dated = dir.write("d.csv", "date;v\n1958-03-29;1\n1958-04-05;2\n");
  NumericTable v = read_csv_columns(dated, {.columns = {"v"}, .delimiter = ';'});
  CHECK(v.columns[0] == std::vector<double>{1.0, 2.0});
  CHECK_THROWS_AS(read_csv_columns(dated, {.delimiter = ';'}), DataError);
}

TEST_CASE("read_csv_columns handles empty cells per the missing policy", "[data][timeseries]") {
  TempDir dir;
  // line 1 header; lines 2..7 rows t = 0..5
  const std::string path = dir.write("gaps.csv",
                                     "t,x,y\n"
                                     "0,,10\n"
                                     "1,2,\n"
                                     "2,,\n"
                                     "3,5,16\n"
                                     "4,6,\n"
                                     "5,,\n");

  SECTION("Error names file:line and the column") {
    const std::string msg = message_of<DataError>([&] { read_csv_columns(path); });
    CHECK_THAT(msg, Catch::Contains("gaps.csv:2:") && Catch::Contains("'x'"));
    // Only selected columns count: y's first gap is on line 3.
    const std::string msg_y =
        message_of<DataError>([&] { read_csv_columns(path, {.columns = {"y"}}); });
    CHECK_THAT(msg_y, Catch::Contains("gaps.csv:3:") && Catch::Contains("'y'"));
  }

  SECTION("Skip drops the rows and counts them") {
    ReadReport report;
    NumericTable t = read_csv_columns(path, {.columns = {"t", "x"}, .missing = Missing::Skip}, &report);
    CHECK(t.columns[0] == std::vector<double>{1, 3, 4});
    CHECK(t.columns[1] == std::vector<double>{2, 5, 6});
    CHECK(report.records == 3);
    CHECK(report.skipped == 3);
    REQUIRE(report.problems.size() == 3);
    CHECK_THAT(report.problems[0], Catch::Contains("gaps.csv:2:"));
  }

  SECTION("Interpolate is linear between present neighbours; edges take the nearest") {
    NumericTable t = read_csv_columns(path, {.columns = {"x", "y"}, .missing = Missing::Interpolate});
    // x: _, 2, _, 5, 6, _   ->  2, 2, 2 + (5-2)/2, 5, 6, 6
    CHECK(t.columns[0] == std::vector<double>{2, 2, 3.5, 5, 6, 6});
    // y: 10, _, _, 16, _, _ ->  10, 12, 14, 16, 16, 16
    CHECK(t.columns[1] == std::vector<double>{10, 12, 14, 16, 16, 16});
    CHECK(t.interpolated == 7);
  }

  SECTION("a column with no values cannot be interpolated") {
    const std::string empty_col = dir.write("e.csv", "a,b\n1,\n2,\n");
    const std::string msg = message_of<DataError>(
        [&] { read_csv_columns(empty_col, {.missing = Missing::Interpolate}); });
    CHECK_THAT(msg, Catch::Contains("'b'"));
  }
}

TEST_CASE("read_csv_columns: interpolating between values far apart stays finite", "[data][timeseries]") {
  TempDir dir;
  // -1e308 + t * (1e308 - -1e308) overflows: 1e308 - -1e308 is inf.
  const std::string path = dir.write("far.csv", "t,x\n1,-1e308\n2,\n3,\n4,1e308\n5,\n");
  const NumericTable t = read_csv_columns(path, {.columns = {"x"}, .missing = Missing::Interpolate});
  REQUIRE(t.columns[0].size() == 5);
  for (double v : t.columns[0]) CHECK(std::isfinite(v));
  CHECK(t.columns[0][0] == -1e308);
  CHECK(t.columns[0][1] < t.columns[0][2]);
  CHECK(t.columns[0][3] == 1e308);
  CHECK(t.columns[0][4] == 1e308);
}

TEST_CASE("read_csv_columns: an empty cell of a column whose name is empty is missing too", "[data][timeseries]") {
  TempDir dir;
  // The header "t," names a second column "", whose cells here are empty.
  const std::string path = dir.write("unnamed.csv", "t,\n1,\n2,3\n");
  const std::string msg = message_of<DataError>([&] { read_csv_columns(path); });
  CHECK_THAT(msg, Catch::Contains("unnamed.csv:2:") && Catch::Contains("empty value in column ''"));
  ReadReport report;
  const NumericTable skipped = read_csv_columns(path, {.missing = Missing::Skip}, &report);
  CHECK(skipped.columns == std::vector<std::vector<double>>{{2}, {3}});
  CHECK(report.skipped == 1);
  const NumericTable filled = read_csv_columns(path, {.missing = Missing::Interpolate});
  CHECK(filled.columns == std::vector<std::vector<double>>{{1, 2}, {3, 3}});
  CHECK(filled.interpolated == 1);
}

TEST_CASE("read_csv_columns: bad numbers and ragged rows follow on_bad", "[data][timeseries]") {
  TempDir dir;
  const std::string path = dir.write("bad.csv",
                                     "a,b\n"     // 1
                                     "1,2\n"     // 2 good
                                     "3,x\n"     // 3 not a number
                                     "4,5,6\n"   // 4 ragged
                                     "nan,1\n"   // 5 not finite
                                     "7,inf\n"   // 6 not finite
                                     "8,9\n"     // 7 good
                                     ",1e999\n"  // 8 overflows (the empty a does not matter)
                                     "2.5abc,1\n"  // 9 trailing garbage
                                     "10\n");    // 10 ragged

  const std::string msg = message_of<DataError>([&] { read_csv_columns(path); });
  CHECK_THAT(msg, Catch::Contains("bad.csv:3:") && Catch::Contains("'x'"));

  ReadReport report;
  NumericTable t = read_csv_columns(path, {.on_bad = OnBadRecord::Skip}, &report);
  CHECK(t.columns[0] == std::vector<double>{1, 8});
  CHECK(t.columns[1] == std::vector<double>{2, 9});
  CHECK(report.records == 2);
  CHECK(report.skipped == 7);
  REQUIRE(report.problems.size() == 7);
  const std::vector<int> lines = {3, 4, 5, 6, 8, 9, 10};
  CHECK_THAT(report.problems[1], Catch::Contains("bad.csv:4:") && Catch::Contains("expected 2 cells, got 3"));
  for (size_t i = 0; i < 7; ++i)
    CHECK_THAT(report.problems[i], Catch::Contains("bad.csv:" + std::to_string(lines[i]) + ":"));

  const std::string ragged = dir.write("ragged.csv", "a,b\r\n1,2\r\n3\r\n");
  const std::string msg_ragged = message_of<DataError>([&] { read_csv_columns(ragged); });
  CHECK_THAT(msg_ragged, Catch::Contains("ragged.csv:3:") && Catch::Contains("expected 2 cells, got 1"));
}

TEST_CASE("read_csv_columns: lone CR line ends, a byte-order mark, a huge bad cell", "[data][timeseries]") {
  TempDir dir;
  NumericTable cr = read_csv_columns(dir.write("cr.csv", "a,b\r1,2\r\r3,4\r"));
  CHECK(cr.names == std::vector<std::string>{"a", "b"});
  CHECK(cr.columns[0] == std::vector<double>{1, 3});
  CHECK(cr.columns[1] == std::vector<double>{2, 4});
  CHECK_THAT(message_of<DataError>([&] { read_csv_columns(dir.write("crbad.csv", "a,b\r1,2\r\r3,x\r")); }),
             Catch::Contains("crbad.csv:4:"));
  NumericTable bom = read_csv_columns(dir.write("bom.csv", "\xEF\xBB\xBF" "a,b\n1,2\n"), {.columns = {"a"}});
  CHECK(bom.columns[0] == std::vector<double>{1});
  // A 5 MB cell that is not a number: the message quotes its start and gives its size.
  const std::string huge(5'000'000, '7');
  const std::string msg =
      message_of<DataError>([&] { read_csv_columns(dir.write("huge.csv", "a,b\n1,2\n3," + huge + "x\n")); });
  CHECK(msg.size() < 300);
  CHECK_THAT(msg, Catch::Contains("huge.csv:3: column 'b': '7777") && Catch::Contains("7...' (5000001 bytes)") &&
                      Catch::Contains("not a finite number"));
}

TEST_CASE("read_csv_columns rejects empty files", "[data][timeseries]") {
  TempDir dir;
  CHECK_THROWS_AS(read_csv_columns(dir.write("empty.csv", "")), DataError);
  CHECK_THROWS_AS(read_csv_columns(dir.write("blank.csv", "\n\r\n  \n")), DataError);
  const std::string msg =
      message_of<DataError>([&] { read_csv_columns(dir.write("header.csv", "a,b\r\n")); });
  CHECK_THAT(msg, Catch::Contains("header.csv") && Catch::Contains("no data rows"));
  // Every row skipped leaves no data either.
  CHECK_THROWS_AS(read_csv_columns(dir.write("allbad.csv", "a\nx\n"), {.on_bad = OnBadRecord::Skip}),
                  DataError);
  CHECK_THROWS_AS(read_csv_columns((dir.path / "missing.csv").string()), DataError);
}

TEST_CASE("read_csv_columns refuses a FIFO or a folder without blocking", "[data][timeseries]") {
  TempDir dir;
  const std::string fifo = loom::test::make_fifo(dir.file("series.csv"));
  loom::test::require_throws_without_blocking<DataError>([&] { read_csv_columns(fifo); }, fifo,
                                                         {fifo, "is a FIFO, not a regular file"});
  CHECK_THAT(message_of<DataError>([&] { read_csv_columns(dir.path.string()); }),
             Catch::Contains("is a directory, not a regular file"));
}

TEST_CASE("read_csv_columns loads the bundled Mauna Loa CO2 file", "[data][timeseries]") {
  const std::string path = std::string(LOOM_EXAMPLES_DATA_DIR) + "/co2_weekly.csv";
  ReadReport report;
  NumericTable t = read_csv_columns(path, {.columns = {"co2"}, .missing = Missing::Interpolate}, &report);
  REQUIRE(t.names == std::vector<std::string>{"co2"});
  REQUIRE(t.rows() == 2284);
  CHECK(t.interpolated == 59);
  CHECK(report.records == 2284);
  CHECK(report.skipped == 0);
  CHECK(t.columns[0].front() == 316.1);
  for (double v : t.columns[0]) REQUIRE((v >= 310.0 && v <= 380.0));

  // Under Missing::Error the first empty cell is named by its line, found here by a plain scan.
  std::ifstream in(path);
  std::string line;
  size_t line_no = 0, first_gap = 0;
  while (std::getline(in, line) && first_gap == 0) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no > 1 && !line.empty() && line.back() == ',') first_gap = line_no;
  }
  REQUIRE(first_gap > 0);
  const std::string msg =
      message_of<DataError>([&] { read_csv_columns(path, {.columns = {"co2"}}); });
  CHECK_THAT(msg, Catch::Contains("co2_weekly.csv:" + std::to_string(first_gap) + ":"));
}

// ---- Normalizer -----------------------------------------------------------------------------------

TEST_CASE("Normalizer standardizes each column with the population std", "[data][timeseries]") {
  manual_seed(11);
  const int64_t n = 64, c = 3;
  Tensor x = trending_series(n, c);
  const std::vector<double> xv = x.to_vector<double>();

  Normalizer norm = Normalizer::fit(x);
  const std::vector<double> mean = norm.mean().to_vector<double>();
  const std::vector<double> stdev = norm.std().to_vector<double>();
  REQUIRE(mean.size() == 3);
  for (size_t j = 0; j < size_t(c); ++j) {
    CHECK(mean[j] == Approx(plain_mean(column(xv, c, j))).epsilon(1e-12));
    CHECK(stdev[j] == Approx(plain_population_std(column(xv, c, j))).epsilon(1e-12));
  }

  Tensor z = norm.transform(x);
  REQUIRE(z.sizes() == x.sizes());
  REQUIRE(z.dtype() == kFloat64);
  const std::vector<double> zv = z.to_vector<double>();
  for (size_t j = 0; j < size_t(c); ++j) {
    CHECK(std::abs(plain_mean(column(zv, c, j))) < 1e-12);
    CHECK(plain_population_std(column(zv, c, j)) == Approx(1.0).epsilon(1e-12));
  }
  test::check_close(norm.inverse(z), xv, kFloat64, "inverse(transform(x))");

  // float32 round trip, a (B, L, C) input, and a column subset agree with the full transform.
  Tensor x32 = x.to(kFloat32);
  test::check_close(norm.inverse(norm.transform(x32)), x32.to_vector<double>(), kFloat32, "float32");
  Tensor batched = norm.transform(x.view({4, 16, 3}));
  CHECK(batched.sizes() == Shape{4, 16, 3});
  CHECK(batched.to_vector<double>() == zv);
  Tensor col2 = x.narrow(1, 2, 1);
  CHECK(norm.transform(col2, {2}).to_vector<double>() == column(zv, c, 2));
}

TEST_CASE("Normalizer: constant columns and bad arguments", "[data][timeseries]") {
  Tensor x = from_vector<double>({0.1, 1.0, 0.1, 2.0, 0.1, 4.0}, {3, 2});
  Normalizer norm = Normalizer::fit(x);
  CHECK(norm.std().to_vector<double>()[0] == 1.0);
  CHECK(norm.mean().to_vector<double>()[0] == 0.1);
  std::vector<double> z = norm.transform(x).to_vector<double>();
  CHECK(column(z, 2, 0) == std::vector<double>{0.0, 0.0, 0.0});
  CHECK(norm.inverse(norm.transform(x)).to_vector<double>() == x.to_vector<double>());

  Normalizer unfitted;
  CHECK_THROWS_AS(unfitted.transform(x), ValueError);
  CHECK_THROWS_AS(Normalizer::fit(x.flatten()), ValueError);
  CHECK_THROWS_AS(Normalizer::fit(zeros({3, 2}, kInt64)), DTypeError);
  CHECK_THAT(message_of<ValueError>([&] { norm.transform(zeros({3, 3}, kFloat64)); }),
             Catch::Contains("(3, 3)"));
  CHECK_THROWS_AS(norm.transform(x.narrow(1, 0, 1), {5}), IndexError);
}

// ---- windows ---------------------------------------------------------------------------------------

TEST_CASE("WindowDataset: window count and content match a plain loop", "[data][timeseries]") {
  manual_seed(12);
  struct Case { size_t n, l, h, stride; };
  for (Case k : {Case{10, 3, 1, 1}, Case{10, 3, 2, 2}, Case{10, 4, 3, 3}, Case{7, 5, 2, 1},
                 Case{20, 1, 1, 5}, Case{13, 2, 4, 4}}) {
    CAPTURE(k.n, k.l, k.h, k.stride);
    const int64_t c = 3;
    Tensor series = randn({int64_t(k.n), c});
    const std::vector<double> s = series.to_vector<double>();
    const std::vector<int64_t> targets = {2, 0};
    WindowDataset ds(series, {k.l, k.h, k.stride}, targets);

    // Every start that leaves room for a whole window, by enumeration.
    std::vector<size_t> starts;
    for (size_t start = 0; start + k.l + k.h <= k.n; start += k.stride) starts.push_back(start);
    REQUIRE(ds.size() == starts.size());

    for (size_t i = 0; i < ds.size(); ++i) {
      WindowExample e = ds.get(i);
      REQUIRE(e.input.sizes() == Shape{int64_t(k.l), c});
      REQUIRE(e.target.sizes() == Shape{int64_t(k.h), 2});
      std::vector<double> input, target;
      for (size_t r = starts[i]; r < starts[i] + k.l; ++r)
        for (int64_t j = 0; j < c; ++j) input.push_back(s[r * c + j]);
      for (size_t r = starts[i] + k.l; r < starts[i] + k.l + k.h; ++r)
        for (int64_t j : targets) target.push_back(s[r * c + size_t(j)]);
      CHECK(e.input.to_vector<double>() == input);
      CHECK(e.target.to_vector<double>() == target);
    }
    CHECK_THROWS_AS(ds.get(ds.size()), IndexError);

    WindowDataset all(series, {k.l, k.h, k.stride});
    CHECK(all.get(0).target.to_vector<double>() ==
          series.narrow(0, int64_t(k.l), int64_t(k.h)).to_vector<double>());
  }
}

TEST_CASE("WindowDataset rejects bad arguments", "[data][timeseries]") {
  Tensor series = zeros({4, 2});
  const std::string msg =
      message_of<ValueError>([&] { WindowDataset(series, {.input_length = 3, .horizon = 2}); });
  CHECK_THAT(msg, Catch::Contains("N=4") && Catch::Contains("L=3") && Catch::Contains("H=2"));
  CHECK_NOTHROW(WindowDataset(series, {.input_length = 3, .horizon = 1}));
  CHECK_THROWS_AS(WindowDataset(series, {.input_length = 0}), ValueError);
  CHECK_THROWS_AS(WindowDataset(series, {.input_length = 1, .horizon = 0}), ValueError);
  CHECK_THROWS_AS(WindowDataset(series, {.input_length = 1, .stride = 0}), ValueError);
  CHECK_THROWS_AS(WindowDataset(zeros({4}), {.input_length = 1}), ValueError);
  CHECK_THROWS_AS(WindowDataset(series, {.input_length = 1}, {2}), IndexError);
  CHECK_THROWS_AS(WindowDataset(series, {.input_length = 1}, {-1}), IndexError);
}

TEST_CASE("collate_windows stacks examples into a batch", "[data][timeseries]") {
  manual_seed(13);
  Tensor series = randn({12, 3});
  WindowDataset ds(series, {.input_length = 4, .horizon = 2, .stride = 3}, {1});
  REQUIRE(ds.size() == 3);
  std::vector<WindowExample> examples = {ds.get(2), ds.get(0), ds.get(1)};
  std::vector<double> inputs, targets;
  for (const auto& e : examples) {
    for (double v : e.input.to_vector<double>()) inputs.push_back(v);
    for (double v : e.target.to_vector<double>()) targets.push_back(v);
  }
  WindowBatch b = collate_windows(examples);
  REQUIRE(b.input.sizes() == Shape{3, 4, 3});
  REQUIRE(b.target.sizes() == Shape{3, 2, 1});
  CHECK(b.input.to_vector<double>() == inputs);
  CHECK(b.target.to_vector<double>() == targets);
  CHECK_THROWS_AS(collate_windows({}), ValueError);
}

// ---- split and baseline -------------------------------------------------------------------------------

TEST_CASE("split_series is chronological and fits the normalizer on train only", "[data][timeseries]") {
  manual_seed(14);
  const int64_t n = 100, c = 2;
  Tensor series = trending_series(n, c);
  const std::vector<double> s = series.to_vector<double>();

  SeriesSplit split = split_series(series, 0.6, 0.2);
  REQUIRE(split.train.sizes() == Shape{60, c});
  REQUIRE(split.valid.sizes() == Shape{20, c});
  REQUIRE(split.test.sizes() == Shape{20, c});

  // Train statistics by a plain loop over the first 60 rows, not the whole series.
  const std::vector<double> train_rows(s.begin(), s.begin() + 60 * c);
  const std::vector<double> mean = split.normalizer.mean().to_vector<double>();
  const std::vector<double> stdev = split.normalizer.std().to_vector<double>();
  for (size_t j = 0; j < size_t(c); ++j) {
    CHECK(mean[j] == Approx(plain_mean(column(train_rows, c, j))).epsilon(1e-12));
    CHECK(stdev[j] == Approx(plain_population_std(column(train_rows, c, j))).epsilon(1e-12));
    // The trend moves the whole series' mean by ~2; a fit on everything would fail above.
    CHECK(std::abs(mean[j] - plain_mean(column(s, c, j))) > 0.5);
  }

  // Each part, un-normalized, is the next chunk of rows in order.
  std::vector<double> joined;
  for (const Tensor& part : {split.train, split.valid, split.test})
    for (double v : split.normalizer.inverse(part).to_vector<double>()) joined.push_back(v);
  test::check_close(from_vector(joined), s, kFloat64, "train|valid|test");
  test::check_close(split.test, split.normalizer.transform(series.narrow(0, 80, 20)).to_vector<double>(),
                    kFloat64, "test");

  for (auto [tf, vf] : {std::pair{0.0, 0.2}, std::pair{0.6, 0.0}, std::pair{1.0, 0.1},
                        std::pair{0.6, 0.4}, std::pair{0.7, 0.5}, std::pair{-0.1, 0.2},
                        std::pair{std::nan(""), 0.2}}) {
    CAPTURE(tf, vf);
    CHECK_THROWS_AS(split_series(series, tf, vf), ValueError);
  }
  // Fractions that leave a part empty.
  CHECK_THROWS_AS(split_series(series.narrow(0, 0, 3), 0.5, 0.2), ValueError);
}

TEST_CASE("naive_last_value_rmse matches a plain loop", "[data][timeseries]") {
  manual_seed(15);
  const int64_t n = 30, c = 3;
  Tensor series = randn({n, c}, kFloat64);
  const std::vector<double> s = series.to_vector<double>();
  const WindowOptions o{.input_length = 4, .horizon = 3, .stride = 2};

  auto reference = [&](const std::vector<int64_t>& cols) {
    double sq = 0;
    size_t count = 0;
    for (size_t start = 0; start + 4 + 3 <= size_t(n); start += 2) {
      const size_t last = start + 3;
      for (size_t r = start + 4; r < start + 7; ++r)
        for (int64_t j : cols) {
          const double e = s[r * c + size_t(j)] - s[last * c + size_t(j)];
          sq += e * e;
          ++count;
        }
    }
    return std::sqrt(sq / double(count));
  };
  CHECK(naive_last_value_rmse(series, o, {1}) == Approx(reference({1})).epsilon(1e-12));
  CHECK(naive_last_value_rmse(series, o) == Approx(reference({0, 1, 2})).epsilon(1e-12));
  CHECK(naive_last_value_rmse(series, o, {1}) != Approx(naive_last_value_rmse(series, o, {0})));
  CHECK_THROWS_AS(naive_last_value_rmse(series.narrow(0, 0, 6), o), ValueError);
  CHECK_THROWS_AS(naive_last_value_rmse(series, o, {3}), IndexError);
}
