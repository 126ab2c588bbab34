// Numeric time series: the CSV column reader, Normalizer, WindowDataset, split and baseline.
#include "data/timeseries.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "core/factories.h"
#include "core/ops.h"
#include "core/safetensors.h"
#include "data/text_lines.h"

namespace loom::data {

namespace {

// ---- reading --------------------------------------------------------------------------------

// Marks a cell that was empty, until the Missing policy deals with it. Parsed cells are
// always finite, so NaN cannot be confused with a value.
constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string_view> split_line(std::string_view line, char delimiter) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    cells.push_back(trim(line.substr(start, end - start)));
    if (end == std::string_view::npos) return cells;
    start = end + 1;
  }
}

// A finite number filling the whole cell, or nothing.
bool parse_number(std::string_view cell, double& out) {
  if (cell.starts_with('+')) cell.remove_prefix(1);  // from_chars takes '-' but not '+'
  const char* end = cell.data() + cell.size();
  auto [ptr, ec] = std::from_chars(cell.data(), end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out);
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + quote_excerpt(n);
  return out;
}

// Indices into the header of the columns to read, in the order the caller asked for.
std::vector<size_t> select_columns(const std::vector<std::string>& header,
                                   const CsvColumnsOptions& options, const std::string& path) {
  auto position = [&](const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    LOOM_CHECK(it != header.end(), ValueError, "read_csv_columns: ", path, " has no column '",
               name, "'; its header names ", join_names(header));
    return size_t(it - header.begin());
  };
  for (const auto& name : options.skip) position(name);  // a typo in skip is an error too

  std::vector<size_t> selected;
  if (!options.columns.empty()) {
    for (const auto& name : options.columns) {
      const size_t p = position(name);
      LOOM_CHECK(std::find(selected.begin(), selected.end(), p) == selected.end(), ValueError,
                 "read_csv_columns: column '", name, "' is asked for twice");
      selected.push_back(p);
    }
  } else {
    for (size_t p = 0; p < header.size(); ++p)
      if (std::find(options.skip.begin(), options.skip.end(), header[p]) == options.skip.end())
        selected.push_back(p);
  }
  LOOM_CHECK(!selected.empty(), ValueError, "read_csv_columns: no columns left to read from ",
             path, " (header ", join_names(header), ")");
  return selected;
}

// Fills the kMissing cells of one column linearly between their present neighbours;
// returns how many it filled.
size_t interpolate_column(std::vector<double>& column, const std::string& path,
                          const std::string& name) {
  std::vector<size_t> present;
  for (size_t r = 0; r < column.size(); ++r)
    if (!std::isnan(column[r])) present.push_back(r);
  if (present.size() == column.size()) return 0;
  LOOM_CHECK(!present.empty(), DataError, path, ": column '", name,
             "' has no values to interpolate from");

  for (size_t r = 0; r < present.front(); ++r) column[r] = column[present.front()];
  for (size_t r = present.back() + 1; r < column.size(); ++r) column[r] = column[present.back()];
  for (size_t k = 0; k + 1 < present.size(); ++k) {
    const size_t lo = present[k], hi = present[k + 1];
    for (size_t r = lo + 1; r < hi; ++r) {
      // std::lerp stays within [column[lo], column[hi]]: a + t * (b - a) overflows to inf
      // when b - a does (-1e308 and 1e308), and the table promises finite values.
      const double t = double(r - lo) / double(hi - lo);
      column[r] = std::lerp(column[lo], column[hi], t);
    }
  }
  return column.size() - present.size();
}

// ---- windows --------------------------------------------------------------------------------

void check_series(const Tensor& series, const char* op) {
  LOOM_CHECK(series.defined() && series.dim() == 2, ValueError, op,
             ": expected a (N, C) series, got ",
             series.defined() ? shape_str(series.sizes()) : std::string("an undefined tensor"));
  LOOM_CHECK(series.is_floating_point(), DTypeError, op, ": expected a floating series, got ",
             dtype_name(series.dtype()));
}

// Checks the options against an (N, C) series and returns the number of complete windows.
size_t count_windows(const Tensor& series, const WindowOptions& o, const char* op) {
  LOOM_CHECK(o.input_length >= 1 && o.horizon >= 1 && o.stride >= 1, ValueError, op,
             ": input_length, horizon and stride must be at least 1, got L=", o.input_length,
             ", H=", o.horizon, ", stride=", o.stride);
  const size_t n = size_t(series.size(0));
  LOOM_CHECK(n >= o.input_length + o.horizon, ValueError, op, ": a series of N=", n,
             " rows holds no window of L=", o.input_length, " input rows and H=", o.horizon,
             " target rows (needs N >= L + H)");
  return (n - o.input_length - o.horizon) / o.stride + 1;
}

// The target columns, checked against C; empty means all of them.
std::vector<int64_t> resolve_target_columns(std::vector<int64_t> columns, int64_t c,
                                            const char* op) {
  if (columns.empty()) {
    for (int64_t i = 0; i < c; ++i) columns.push_back(i);
    return columns;
  }
  for (int64_t col : columns)
    LOOM_CHECK(col >= 0 && col < c, IndexError, op, ": column ", col,
               " out of range for a series of ", c, " columns");
  return columns;
}

}  // namespace

// ---- reading --------------------------------------------------------------------------------

Tensor NumericTable::to_tensor(DType dtype) const {
  LOOM_CHECK(is_floating_point(dtype), DTypeError, "NumericTable::to_tensor: expected a floating dtype, got ",
             dtype_name(dtype));
  const size_t n = rows(), c = columns.size();
  std::vector<double> flat(n * c);
  for (size_t j = 0; j < c; ++j) {
    LOOM_CHECK(columns[j].size() == n, ValueError, "NumericTable::to_tensor: column ", j, " has ",
               columns[j].size(), " rows, column 0 has ", n);
    for (size_t r = 0; r < n; ++r) flat[r * c + j] = columns[j][r];
  }
  return from_vector(flat, {int64_t(n), int64_t(c)}, dtype);
}

NumericTable read_csv_columns(const std::string& path, const CsvColumnsOptions& options,
                              ReadReport* report) {
  ReadReport local;
  ReadReport& rep = report ? *report : local;
  rep.source = path;

  std::string bytes;
  const std::string unreadable = read_regular_file(path, bytes);
  LOOM_CHECK(unreadable.empty(), DataError, path, ": ", unreadable);
  const std::string_view content = strip_utf8_bom(bytes);

  std::string_view line;
  size_t line_no = 0, position = 0;
  // The next non-blank line, without its line end ("\n", "\r\n" or "\r"); false at the
  // end of the file.
  auto next_line = [&]() {
    while (position < content.size()) {
      const TextLine next = line_at(content, position);
      position = next.next;
      ++line_no;
      line = next.text;
      if (!trim(line).empty()) return true;
    }
    return false;
  };

  LOOM_CHECK(next_line(), DataError, path, ": the file is empty (expected a header line)");
  std::vector<std::string> header;
  for (std::string_view cell : split_line(line, options.delimiter)) {
    LOOM_CHECK(std::find(header.begin(), header.end(), cell) == header.end(), DataError, path,
               ":", line_no, ": column ", quote_excerpt(cell), " appears twice in the header");
    header.emplace_back(cell);
  }
  const std::vector<size_t> selected = select_columns(header, options, path);

  NumericTable table;
  for (size_t p : selected) table.names.push_back(header[p]);
  table.columns.resize(selected.size());
  std::vector<double> row(selected.size());

  while (next_line()) {
    const std::vector<std::string_view> cells = split_line(line, options.delimiter);
    if (cells.size() != header.size()) {
      rep.bad_record(options.on_bad, path, line_no,
                     detail::str("expected ", header.size(), " cells, got ", cells.size()));
      continue;
    }
    bool bad = false;
    // The first selected column with an empty cell. Not its name: a header may name a
    // column "" (as "date,"), and an empty name must not pass for "nothing missing".
    std::optional<size_t> missing_in;
    for (size_t j = 0; j < selected.size() && !bad; ++j) {
      const std::string_view cell = cells[selected[j]];
      if (cell.empty()) {
        row[j] = kMissing;
        if (!missing_in) missing_in = j;
      } else if (!parse_number(cell, row[j])) {
        rep.bad_record(options.on_bad, path, line_no,
                       detail::str("column ", quote_excerpt(table.names[j]), ": ", quote_excerpt(cell),
                                   " is not a finite number"));
        bad = true;
      }
    }
    if (bad) continue;
    if (missing_in) {
      const std::string why = "empty value in column " + quote_excerpt(table.names[*missing_in]);
      if (options.missing == CsvColumnsOptions::Missing::Error)
        throw DataError(path + ":" + std::to_string(line_no) + ": " + why);
      if (options.missing == CsvColumnsOptions::Missing::Skip) {
        rep.bad_record(OnBadRecord::Skip, path, line_no, why);  // counts, never throws
        continue;
      }
    }
    for (size_t j = 0; j < selected.size(); ++j) table.columns[j].push_back(row[j]);
    ++rep.records;
  }
  LOOM_CHECK(table.rows() > 0, DataError, path, ": no data rows after the header (",
             rep.skipped, " skipped)");

  if (options.missing == CsvColumnsOptions::Missing::Interpolate)
    for (size_t j = 0; j < table.columns.size(); ++j)
      table.interpolated += interpolate_column(table.columns[j], path, table.names[j]);
  return table;
}

// ---- normalizing ----------------------------------------------------------------------------

Normalizer Normalizer::fit(const Tensor& train) {
  check_series(train, "Normalizer::fit");
  const size_t n = size_t(train.size(0)), c = size_t(train.size(1));
  LOOM_CHECK(n >= 1 && c >= 1, ValueError, "Normalizer::fit: needs at least one row and column, got ",
             shape_str(train.sizes()));
  const std::vector<double> x = train.to_vector<double>();

  Normalizer norm;
  norm.mean_.assign(c, 0.0);
  norm.std_.assign(c, 0.0);
  for (size_t j = 0; j < c; ++j) {
    bool constant = true;
    double sum = 0.0;
    for (size_t r = 0; r < n; ++r) {
      sum += x[r * c + j];
      constant = constant && x[r * c + j] == x[j];
    }
    if (constant) {  // exact mean, and std 1 rather than 0 (or a rounding residue)
      norm.mean_[j] = x[j];
      norm.std_[j] = 1.0;
      continue;
    }
    const double mean = sum / double(n);
    double squares = 0.0;
    for (size_t r = 0; r < n; ++r) squares += (x[r * c + j] - mean) * (x[r * c + j] - mean);
    norm.mean_[j] = mean;
    norm.std_[j] = std::sqrt(squares / double(n));
  }
  return norm;
}

Tensor Normalizer::apply(const Tensor& x, const std::vector<int64_t>& columns, bool forward) const {
  const char* op = forward ? "Normalizer::transform" : "Normalizer::inverse";
  LOOM_CHECK(fitted(), ValueError, op, ": the normalizer was never fitted (use Normalizer::fit)");
  LOOM_CHECK(x.defined() && x.dim() >= 1, ValueError, op, ": expected a (..., C) tensor");
  LOOM_CHECK(x.is_floating_point(), DTypeError, op, ": expected a floating tensor, got ",
             dtype_name(x.dtype()));
  const std::vector<int64_t> cols =
      resolve_target_columns(columns, int64_t(mean_.size()), op);
  const size_t c = cols.size();
  LOOM_CHECK(x.size(-1) == int64_t(c), ValueError, op, ": the last dim of ", shape_str(x.sizes()),
             " should be ", c, " (the ", columns.empty() ? "fitted" : "selected", " columns)");

  std::vector<double> v = x.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t j = size_t(cols[i % c]);
    v[i] = forward ? (v[i] - mean_[j]) / std_[j] : v[i] * std_[j] + mean_[j];
  }
  return from_vector(v, x.sizes(), TensorOptions(x.dtype()).device(x.device()));
}

Tensor Normalizer::transform(const Tensor& x, const std::vector<int64_t>& columns) const {
  return apply(x, columns, /*forward=*/true);
}

Tensor Normalizer::inverse(const Tensor& x, const std::vector<int64_t>& columns) const {
  return apply(x, columns, /*forward=*/false);
}

Tensor Normalizer::mean() const {
  LOOM_CHECK(fitted(), ValueError, "Normalizer::mean: the normalizer was never fitted");
  return from_vector(mean_);
}

Tensor Normalizer::std() const {
  LOOM_CHECK(fitted(), ValueError, "Normalizer::std: the normalizer was never fitted");
  return from_vector(std_);
}

// ---- windows --------------------------------------------------------------------------------

WindowDataset::WindowDataset(Tensor series, WindowOptions options,
                             std::vector<int64_t> target_columns)
    : options_(options) {
  check_series(series, "WindowDataset");
  size_ = count_windows(series, options_, "WindowDataset");
  const bool all = target_columns.empty();
  target_columns_ = resolve_target_columns(std::move(target_columns), series.size(1), "WindowDataset");
  if (!all) target_index_ = from_vector(target_columns_);
  series_ = series.detach().contiguous();
}

WindowExample WindowDataset::get(size_t index) const {
  LOOM_CHECK(index < size_, IndexError, "WindowDataset::get: index ", index,
             " out of range for a dataset of size ", size_);
  const int64_t start = int64_t(index * options_.stride);
  const int64_t l = int64_t(options_.input_length), h = int64_t(options_.horizon);
  Tensor target = series_.narrow(0, start + l, h);
  if (target_index_.defined()) target = target.index_select(1, target_index_);
  return {series_.narrow(0, start, l), target};
}

WindowBatch collate_windows(std::vector<WindowExample> examples) {
  LOOM_CHECK(!examples.empty(), ValueError, "collate_windows: no examples to collate");
  std::vector<Tensor> inputs, targets;
  inputs.reserve(examples.size());
  targets.reserve(examples.size());
  for (auto& e : examples) {
    inputs.push_back(std::move(e.input));
    targets.push_back(std::move(e.target));
  }
  return {stack(inputs), stack(targets)};
}

// ---- splitting and baselines --------------------------------------------------------------------

SeriesSplit split_series(const Tensor& series, double train_fraction, double valid_fraction) {
  check_series(series, "split_series");
  auto in_unit = [](double f) { return f > 0.0 && f < 1.0; };
  LOOM_CHECK(in_unit(train_fraction) && in_unit(valid_fraction) &&
                 train_fraction + valid_fraction < 1.0,
             ValueError, "split_series: fractions must lie in (0, 1) and sum to less than 1, got train ",
             train_fraction, " and valid ", valid_fraction);
  const int64_t n = series.size(0);
  const int64_t n_train = std::llround(double(n) * train_fraction);
  const int64_t n_valid = std::llround(double(n) * valid_fraction);
  const int64_t n_test = n - n_train - n_valid;
  LOOM_CHECK(n_train >= 1 && n_valid >= 1 && n_test >= 1, ValueError, "split_series: N=", n,
             " rows split as train ", n_train, ", valid ", n_valid, ", test ", n_test,
             "; every part needs a row");

  SeriesSplit split;
  split.normalizer = Normalizer::fit(series.narrow(0, 0, n_train));
  split.train = split.normalizer.transform(series.narrow(0, 0, n_train));
  split.valid = split.normalizer.transform(series.narrow(0, n_train, n_valid));
  split.test = split.normalizer.transform(series.narrow(0, n_train + n_valid, n_test));
  return split;
}

double naive_last_value_rmse(const Tensor& series_part, WindowOptions options,
                             std::vector<int64_t> target_columns) {
  const char* op = "naive_last_value_rmse";
  check_series(series_part, op);
  const size_t windows = count_windows(series_part, options, op);
  const int64_t c = series_part.size(1);
  const std::vector<int64_t> cols = resolve_target_columns(std::move(target_columns), c, op);
  const std::vector<double> x = series_part.to_vector<double>();

  double squares = 0.0;
  size_t count = 0;
  for (size_t w = 0; w < windows; ++w) {
    const size_t last = w * options.stride + options.input_length - 1;
    for (size_t h = 1; h <= options.horizon; ++h)
      for (int64_t col : cols) {
        const double err = x[(last + h) * c + col] - x[last * c + col];
        squares += err * err;
        ++count;
      }
  }
  return std::sqrt(squares / double(count));
}

}  // namespace loom::data
