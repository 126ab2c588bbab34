// libFuzzer target for the labelled-text readers (data/text_readers.cpp) and what a text
// classifier builds from them (data/text_dataset.cpp): read_tsv and read_csv, under each
// bad-record policy, with and without a header, for two column layouts. Any file must
// either read or throw a loom::Error — never crash, overflow, hang, or throw anything else.
// What reads must be consistent: as many records as the report says, each with a trimmed
// non-empty UTF-8 label and a line inside the file; Skip keeps what Throw keeps; and the
// records always make a dataset (vocab, label set, examples, batches) whose ids are all in
// range. Built and run by scripts/fuzz.sh.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/text_dataset.h"
#include "data/text_lines.h"
#include "fuzz_util.h"

using namespace loom::data;

namespace {

using Reader = std::vector<LabelledText> (*)(const std::string&, const TextReadOptions&, ReadReport*);

// The lines of the file as the readers count them, and at least 1.
size_t count_lines(std::string_view content) {
  size_t lines = 0;
  for (size_t at = 0; at < content.size(); at = line_at(content, at).next) ++lines;
  return std::max<size_t>(lines, 1);
}

void check_records(const std::vector<LabelledText>& records, const ReadReport& report, size_t lines) {
  FUZZ_CHECK(!records.empty() && report.records == records.size());
  FUZZ_CHECK(records.size() <= lines);
  size_t previous = 0;
  for (const LabelledText& r : records) {
    FUZZ_CHECK(r.line > previous && r.line <= lines);
    previous = r.line;
    FUZZ_CHECK(!r.label.empty() && is_valid_utf8(r.label) && is_valid_utf8(r.text));
    constexpr std::string_view kSpaces = " \t\r\n\v\f";  // what the readers trim off a label
    FUZZ_CHECK(kSpaces.find(r.label.front()) == kSpaces.npos && kSpaces.find(r.label.back()) == kSpaces.npos);
  }
}

// Everything a text classifier makes of the records; none of it may fail, since the
// readers let through only labelled, valid UTF-8 records.
void check_dataset(const std::vector<LabelledText>& records) {
  constexpr size_t kMaxLength = 8;
  const Vocab vocab = Vocab::build(tokenize_texts(records), /*min_freq=*/1, /*max_size=*/64);
  const LabelSet labels = LabelSet::from(records);
  FUZZ_CHECK(labels.size() >= 1 && labels.size() <= records.size());
  const TextClassificationDataset dataset(records, vocab, labels, kMaxLength);
  FUZZ_CHECK(dataset.size() == records.size() && dataset.lengths().size() == records.size());
  std::vector<TextExample> batch;
  for (size_t i = 0; i < dataset.size(); ++i) {
    const TextExample e = dataset.get(i);
    FUZZ_CHECK(e.label >= 0 && size_t(e.label) < labels.size() && labels.name(e.label) == records[i].label);
    FUZZ_CHECK(!e.tokens.empty() && e.tokens.size() <= kMaxLength && e.tokens.size() == dataset.lengths()[i]);
    for (int64_t id : e.tokens) FUZZ_CHECK(id >= 0 && size_t(id) < vocab.size());
    if (batch.size() < 4) batch.push_back(e);
  }
  const TextBatch b = collate_text(batch);
  FUZZ_CHECK(b.tokens.dim() == 2 && size_t(b.tokens.size(0)) == batch.size() && b.tokens.size(1) >= 1 &&
             size_t(b.tokens.size(1)) <= kMaxLength);
  const auto [train, test] = split_train_test(records, 0.25, /*seed=*/0);
  FUZZ_CHECK(train.size() + test.size() == records.size());
}

// The records read, or nothing when the read throws a loom::Error.
std::optional<std::vector<LabelledText>> try_read(Reader read, const std::string& path, const TextReadOptions& options,
                                                  ReadReport& report) {
  try {
    return read(path, options, &report);
  } catch (const loom::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t lines = count_lines(strip_utf8_bom(bytes));
  const std::string path = loom::fuzz::input_file(data, size, "input.txt");
  for (const Reader read : {Reader(&read_tsv), Reader(&read_csv)})
    for (const bool header : {false, true})
      for (const auto [label_column, text_column] : {std::pair<size_t, size_t>{0, 1}, {2, 0}}) {
        ReadReport strict_report, lenient_report;
        const auto strict =
            try_read(read, path, {OnBadRecord::Throw, header, label_column, text_column}, strict_report);
        const auto lenient =
            try_read(read, path, {OnBadRecord::Skip, header, label_column, text_column}, lenient_report);
        if (strict) {
          check_records(*strict, strict_report, lines);
          FUZZ_CHECK(strict_report.skipped == 0 && strict_report.problems.empty());
          check_dataset(*strict);
          // Nothing bad in the file: the lenient read keeps the same records.
          FUZZ_CHECK(lenient && lenient_report.skipped == 0 && lenient->size() == strict->size());
          for (size_t i = 0; i < strict->size(); ++i) {
            const LabelledText &a = (*strict)[i], &b = (*lenient)[i];
            FUZZ_CHECK(a.label == b.label && a.text == b.text && a.line == b.line);
          }
        }
        if (lenient) {
          check_records(*lenient, lenient_report, lines);
          FUZZ_CHECK(lenient_report.problems.size() == std::min(lenient_report.skipped, ReadReport::kMaxProblems));
          check_dataset(*lenient);
        }
      }
  return 0;
}
