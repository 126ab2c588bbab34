// Readers for labelled text (sentiment, topic, ... classification data): TSV, CSV (RFC
// 4180) and the aclImdb directory layout, plus LabelSet, the label <-> class id table.
//
//   ReadReport report;
//   auto records = read_tsv("movie_snippets.tsv", {.on_bad = OnBadRecord::Skip}, &report);
//   LabelSet labels = LabelSet::from(records);   // {"neg", "pos"} -> 0, 1
//
// Files are hostile input. A malformed record (a missing label or text column, an empty
// label, invalid UTF-8, a row with a different number of columns than the first, an
// unterminated quote) goes to report.bad_record: a DataError "file:line: why" under
// OnBadRecord::Throw, skipped and counted under Skip. A file that yields no records at all
// (empty, only a header, every record bad) is a DataError whatever the policy, and so is
// one that cannot be opened. Labels are trimmed of surrounding spaces; texts are kept as
// they are (an empty text is a record; the tokenizer copes with it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/read_report.h"

namespace loom::data {

struct LabelledText {
  std::string label;
  std::string text;
  size_t line = 0;  // where the record starts in its file (1 for an aclImdb review file)
};

struct TextReadOptions {
  OnBadRecord on_bad = OnBadRecord::Throw;
  bool header = false;      // the first row names the columns and is not a record
  size_t label_column = 0;  // 0-based
  size_t text_column = 1;
};

// The readers reset *report (when given) and fill it in: source, records, skipped, problems.

// One record per line, columns separated by tabs. CRLF line ends are accepted and blank
// lines ignored.
std::vector<LabelledText> read_tsv(const std::string& path, const TextReadOptions& options = {},
                                   ReadReport* report = nullptr);

// RFC 4180: comma-separated; a field may be double-quoted, and then holds commas, line
// breaks and "" for a quote. A record's line is the line it starts on. A quote inside an
// unquoted field is kept as it is (as Python's csv module does); text after a closing
// quote is a bad record. A quote opened and never closed is a bad record that spoils only
// the line it opens on: reading resumes on the next line.
std::vector<LabelledText> read_csv(const std::string& path, const TextReadOptions& options = {},
                                   ReadReport* report = nullptr);

// The Large Movie Review Dataset's layout: root/<split>/{neg,pos}/*.txt, one review per
// file, labelled "neg" or "pos". split is "train" or "test". Reviews come neg first, then
// pos, each in byte-wise sorted filename order (so "10_2.txt" before "1_1.txt": the order
// is deterministic, not numeric); "<br />" becomes a space. Only options.on_bad is used.
// An unreadable or non-UTF-8 file is a bad record at line 1 of that file; a missing
// directory is a DataError naming it.
std::vector<LabelledText> read_aclimdb(const std::string& root, const std::string& split,
                                       const TextReadOptions& options = {}, ReadReport* report = nullptr);

// By path: ".csv" (any case) -> read_csv, any other file -> read_tsv. A directory is a
// ValueError pointing to read_aclimdb, which needs a split.
std::vector<LabelledText> read_labelled_text(const std::string& path, const TextReadOptions& options = {},
                                             ReadReport* report = nullptr);

// Label names <-> class ids 0..K-1, the names in sorted order (so "neg" = 0, "pos" = 1).
class LabelSet {
 public:
  LabelSet() = default;
  explicit LabelSet(std::vector<std::string> names);  // sorted, duplicates dropped
  static LabelSet from(const std::vector<LabelledText>& records);

  size_t size() const { return names_.size(); }
  bool contains(const std::string& name) const;
  int64_t id(const std::string& name) const;      // ValueError naming the known labels
  const std::string& name(int64_t id) const;      // IndexError out of range
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
};

}  // namespace loom::data
