// Numeric time series: a CSV column reader, a z-score Normalizer, and a dataset of sliding
// (input window, target window) pairs for forecasting.
//
//   NumericTable t = read_csv_columns("co2.csv", {.columns = {"co2"},
//                                                 .missing = CsvColumnsOptions::Missing::Interpolate});
//   SeriesSplit s = split_series(t.to_tensor(), 0.7, 0.15);   // chronological; fit on train
//   WindowDataset train(s.train, {.input_length = 52, .horizon = 4});
//   WindowBatch b = collate_windows({train.get(0), train.get(1)});  // (2, 52, 1), (2, 4, 1)
//
// Rows are kept in file order and never shuffled: a forecaster is judged on the most recent
// part of the series, and the Normalizer only ever sees the training part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/read_report.h"

namespace loom::data {

// ---- reading --------------------------------------------------------------------------------

struct CsvColumnsOptions {
  // Columns to read, by header name and in this order; empty = every column not in skip.
  std::vector<std::string> columns;
  std::vector<std::string> skip;
  // For a malformed row: a cell that is not a finite number, or the wrong number of cells.
  OnBadRecord on_bad = OnBadRecord::Throw;
  // For an empty cell in a selected column. Error: DataError naming file:line. Skip: drop the
  // row (counted in ReadReport::skipped). Interpolate: linear in the row position between the
  // column's nearest present values; a leading or trailing gap takes the nearest one.
  enum class Missing { Error, Skip, Interpolate } missing = Missing::Error;
  char delimiter = ',';
};

struct NumericTable {
  std::vector<std::string> names;            // the selected columns
  std::vector<std::vector<double>> columns;  // columns[c][row]
  size_t interpolated = 0;                   // cells filled in under Missing::Interpolate

  size_t rows() const { return columns.empty() ? 0 : columns.front().size(); }
  // (rows, C) in a floating dtype.
  Tensor to_tensor(DType dtype = kFloat32) const;
};

// Reads the selected columns of a delimited file whose first line is a header. Cells are
// trimmed of spaces and parsed with std::from_chars (no quoting; "nan" and "inf" are bad
// records); CRLF line ends are fine and blank lines are ignored, as pandas does. Only the
// selected columns are parsed, so a date column may hold anything. An unknown column name is
// a ValueError listing the header; an empty file, a header without rows or a file that cannot
// be opened is a DataError.
NumericTable read_csv_columns(const std::string& path, const CsvColumnsOptions& options = {},
                              ReadReport* report = nullptr);

// ---- normalizing ----------------------------------------------------------------------------

// Per-column z-score, (x - mean) / std, as sklearn's StandardScaler: std is the population
// standard deviation (divided by N, not N - 1), and a constant column gets std 1 so it maps
// to zeros instead of dividing by zero. Fit it on the training split only (split_series does).
class Normalizer {
 public:
  Normalizer() = default;  // unfitted: transform and inverse throw ValueError
  // train: (N, C) floating, N >= 1. Statistics are computed in double.
  static Normalizer fit(const Tensor& train);

  // x: (..., C), or (..., columns.size()) when columns picks which fitted columns x holds
  // (e.g. a target of a few columns). The result has x's shape and dtype.
  Tensor transform(const Tensor& x, const std::vector<int64_t>& columns = {}) const;
  Tensor inverse(const Tensor& x, const std::vector<int64_t>& columns = {}) const;

  Tensor mean() const;  // (C) float64
  Tensor std() const;   // (C) float64
  bool fitted() const { return !mean_.empty(); }

 private:
  Tensor apply(const Tensor& x, const std::vector<int64_t>& columns, bool forward) const;
  std::vector<double> mean_, std_;
};

// ---- windows --------------------------------------------------------------------------------

struct WindowOptions {
  size_t input_length = 0;  // L rows of input
  size_t horizon = 1;       // H rows to predict, right after the input
  size_t stride = 1;        // rows between the starts of consecutive windows
};

struct WindowExample {
  Tensor input;   // (L, C)
  Tensor target;  // (H, C_target)
};

// Window i takes rows [i*stride, i*stride + L) as input and the next H rows as target; only
// complete windows count, so size() = (N - L - H) / stride + 1 for N >= L + H.
class WindowDataset : public Dataset<WindowExample> {
 public:
  // series: (N, C) floating. target_columns: which columns the target holds (empty = all).
  // No complete window is a ValueError naming N, L and H; a column out of range an IndexError.
  WindowDataset(Tensor series, WindowOptions options, std::vector<int64_t> target_columns = {});

  size_t size() const override { return size_; }
  // input is a view into the series; target is a view too unless target_columns picks some.
  WindowExample get(size_t index) const override;

  const WindowOptions& options() const { return options_; }
  const std::vector<int64_t>& target_columns() const { return target_columns_; }

 private:
  Tensor series_;
  WindowOptions options_;
  std::vector<int64_t> target_columns_;  // resolved: never empty
  Tensor target_index_;                  // int64, for index_select; undefined = all columns
  size_t size_ = 0;
};

struct WindowBatch {
  Tensor input;   // (B, L, C)
  Tensor target;  // (B, H, C_target)
  WindowBatch to(Device device, bool non_blocking = false) const {
    return {input.to(device, non_blocking), target.to(device, non_blocking)};
  }
  WindowBatch pin_memory() const { return {input.pin_memory(), target.pin_memory()}; }  // DataLoaderOptions::pin_memory
};

// Stacks examples into a batch; an empty vector is a ValueError.
WindowBatch collate_windows(std::vector<WindowExample> examples);

// ---- splitting and baselines --------------------------------------------------------------------

struct SeriesSplit {
  Tensor train, valid, test;  // normalized, chronological: test is the most recent part
  Normalizer normalizer;      // fitted on train only
};

// Splits (N, C) into the first round(N * train_fraction) rows, the next round(N *
// valid_fraction) and the rest, fits a Normalizer on the first part and applies it to all
// three. Fractions must lie in (0, 1) with a sum below 1, and every part must get a row
// (ValueError otherwise).
SeriesSplit split_series(const Tensor& series, double train_fraction, double valid_fraction);

// Root mean squared error of predicting every target step of every window as the last input
// row's value, over the windows of series_part as WindowDataset makes them: the "persistence"
// forecast a model must beat. In the units of series_part (normalized in, normalized out).
double naive_last_value_rmse(const Tensor& series_part, WindowOptions options,
                             std::vector<int64_t> target_columns = {});

}  // namespace loom::data
