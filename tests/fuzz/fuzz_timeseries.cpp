// libFuzzer target for the time-series CSV reader, read_csv_columns (data/timeseries.cpp),
// under every missing-value policy, both bad-record policies, two delimiters and three
// column selections. Any file must either read or throw a loom::Error — never crash,
// overflow, hang, or throw anything else. What reads must be consistent: every selected
// column has the same number of rows (at least one, as many as the report counts, no more
// than the file has lines), every value is finite (parsed or interpolated), and the
// table turns into a tensor of that shape. Built and run by scripts/fuzz.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/text_lines.h"
#include "data/timeseries.h"
#include "fuzz_util.h"

using namespace loom::data;
using Missing = CsvColumnsOptions::Missing;

namespace {

void check_table(const NumericTable& t, const CsvColumnsOptions& options, const ReadReport& report, size_t lines) {
  FUZZ_CHECK(!t.names.empty() && t.names.size() == t.columns.size());
  const size_t rows = t.rows();
  FUZZ_CHECK(rows >= 1 && rows < lines && report.records == rows);  // the header is a line too
  for (const std::vector<double>& column : t.columns) {
    FUZZ_CHECK(column.size() == rows);
    for (double v : column) FUZZ_CHECK(std::isfinite(v));
  }
  if (options.missing != Missing::Interpolate) FUZZ_CHECK(t.interpolated == 0);
  FUZZ_CHECK(t.interpolated < rows * t.columns.size());  // some value in each column is real
  if (options.on_bad == OnBadRecord::Throw && options.missing != Missing::Skip) FUZZ_CHECK(report.skipped == 0);
  const loom::Tensor x = t.to_tensor(loom::kFloat64);
  FUZZ_CHECK(x.dim() == 2 && size_t(x.size(0)) == rows && size_t(x.size(1)) == t.columns.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view content = strip_utf8_bom(std::string_view(reinterpret_cast<const char*>(data), size));
  size_t lines = 0;
  for (size_t at = 0; at < content.size(); at = line_at(content, at).next) ++lines;
  const std::string path = loom::fuzz::input_file(data, size, "series.csv");
  for (const Missing missing : {Missing::Error, Missing::Skip, Missing::Interpolate})
    for (const OnBadRecord on_bad : {OnBadRecord::Throw, OnBadRecord::Skip})
      for (const char delimiter : {',', ';'})
        for (int selection = 0; selection < 3; ++selection) {
          CsvColumnsOptions options;
          options.missing = missing;
          options.on_bad = on_bad;
          options.delimiter = delimiter;
          if (selection == 1) options.columns = {"value"};  // the seeds' column names
          if (selection == 2) options.skip = {"date"};
          ReadReport report;
          NumericTable table;
          try {
            table = read_csv_columns(path, options, &report);
          } catch (const loom::Error&) {
            continue;
          }
          check_table(table, options, report, lines);
        }
  return 0;
}
