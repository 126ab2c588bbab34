// The labelled-text readers (TSV, CSV, aclImdb) and LabelSet; see data/text_readers.h.
#include "data/text_readers.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "core/safetensors.h"
#include "data/text_lines.h"
#include "data/tokenizer.h"

namespace loom::data {

namespace fs = std::filesystem;

namespace {

// The whole file in content without a byte-order mark, or false with why set
// (core/safetensors.h: never blocks on a FIFO, never opens a device).
bool read_whole_file(const std::string& path, std::string& content, std::string& why) {
  why = read_regular_file(path, content);
  content.erase(0, content.size() - strip_utf8_bom(content).size());
  return why.empty();
}

std::string read_file_or_throw(const std::string& path) {
  std::string content, why;
  LOOM_CHECK(read_whole_file(path, content, why), DataError, path, ": ", why);
  return content;
}

// The report a reader fills: the caller's, reset, or a local one.
ReadReport& fresh_report(ReadReport* given, ReadReport& local, const std::string& source) {
  ReadReport& report = given != nullptr ? *given : local;
  report = ReadReport{};
  report.source = source;
  return report;
}

std::string trim_spaces(std::string_view s) {
  constexpr std::string_view kSpaces = " \t\r\n\v\f";
  const size_t first = s.find_first_not_of(kSpaces);
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(kSpaces) - first + 1));
}

void check_columns(const TextReadOptions& options, const char* reader) {
  LOOM_CHECK(options.label_column != options.text_column, ValueError, reader,
             ": label_column and text_column are both ", options.label_column);
}

// Turns rows of fields into records with the checks TSV and CSV share: the header, the
// column count, UTF-8 and the label.
class RecordCollector {
 public:
  RecordCollector(const std::string& path, const TextReadOptions& options, ReadReport& report)
      : path_(path), options_(options), report_(report), header_pending_(options.header) {}

  void bad(size_t line, const std::string& why) { report_.bad_record(options_.on_bad, path_, line, why); }

  void add(std::vector<std::string> fields, size_t line) {
    if (header_pending_) {  // names the columns and fixes their number
      header_pending_ = false;
      columns_ = fields.size();
      return;
    }
    for (size_t c = 0; c < fields.size(); ++c) {
      if (const auto at = first_invalid_utf8_byte(fields[c]))
        return bad(line, "invalid UTF-8 in column " + std::to_string(c) + " at byte " + std::to_string(*at));
    }
    const std::string has = " (the row has " + std::to_string(fields.size()) + " column(s); columns count from 0)";
    if (fields.size() <= options_.label_column)
      return bad(line, "missing the label column " + std::to_string(options_.label_column) + has);
    if (fields.size() <= options_.text_column)
      return bad(line, "missing the text column " + std::to_string(options_.text_column) + has);
    if (columns_ && fields.size() != *columns_)
      return bad(line, "ragged row: " + std::to_string(fields.size()) + " columns where the first row has " +
                           std::to_string(*columns_));
    std::string label = trim_spaces(fields[options_.label_column]);
    if (label.empty()) return bad(line, "empty label");
    columns_ = fields.size();
    records_.push_back({std::move(label), std::move(fields[options_.text_column]), line});
  }

  std::vector<LabelledText> finish() {
    report_.records = records_.size();
    if (records_.empty()) {
      std::string why = path_ + ": no records";
      if (report_.skipped > 0)
        why += " (all " + std::to_string(report_.skipped) + " were bad; the first: " + report_.problems.front() + ")";
      else if (options_.header)
        why += " after the header";
      throw DataError(why);
    }
    return std::move(records_);
  }

 private:
  const std::string& path_;
  const TextReadOptions& options_;
  ReadReport& report_;
  bool header_pending_;
  std::optional<size_t> columns_;  // the header's or the first record's
  std::vector<LabelledText> records_;
};

std::vector<std::string> split_tabs(std::string_view line) {
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    const size_t tab = line.find('\t', start);
    fields.emplace_back(line.substr(start, tab - start));
    if (tab == std::string_view::npos) return fields;
    start = tab + 1;
  }
}

// One CSV record scanned from text[begin..]: its fields, or why it is malformed; and
// where the next record starts.
struct CsvRecord {
  std::vector<std::string> fields;
  std::string error;  // non-empty: malformed
  size_t next = 0;
  size_t next_line = 0;
};

// The position just past the line end after position at (or the end of text).
size_t after_line_end(std::string_view text, size_t at) { return line_at(text, at).next; }

CsvRecord scan_csv_record(std::string_view text, size_t begin, size_t line) {
  CsvRecord record;
  const auto malformed = [&](std::string why, size_t resume_at, size_t resume_line) {
    record.error = std::move(why);
    record.next = after_line_end(text, resume_at);
    record.next_line = resume_line + 1;
    return record;
  };
  const auto at_line_end = [&](size_t i) {  // "\n", "\r\n", "\r" or the end of the text
    return i == text.size() || text[i] == '\n' || text[i] == '\r';
  };
  size_t i = begin;
  while (true) {
    std::string field;
    if (i < text.size() && text[i] == '"') {
      const size_t quote_line = line;
      const size_t quote_at = i++;
      while (true) {
        if (i == text.size())
          return malformed("unterminated quoted field (the quote opens on line " + std::to_string(quote_line) + ")",
                           quote_at, quote_line);
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++line;
        field += text[i++];
      }
      if (i < text.size() && text[i] != ',' && !at_line_end(i))
        return malformed("text after the closing quote of a field", i, line);
    } else {
      // Unquoted: up to the comma or line end. A quote in here is kept as it is (as
      // Python's csv module does).
      while (i < text.size() && text[i] != ',' && !at_line_end(i)) field += text[i++];
    }
    record.fields.push_back(std::move(field));
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    record.next = after_line_end(text, i);
    record.next_line = line + 1;
    return record;
  }
}

std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (size_t start = 0;;) {
    const size_t at = text.find(from, start);
    out += text.substr(start, at - start);  // to the end when at is npos
    if (at == std::string_view::npos) return out;
    out += to;
    start = at + from.size();
  }
}

}  // namespace

std::vector<LabelledText> read_tsv(const std::string& path, const TextReadOptions& options, ReadReport* report) {
  check_columns(options, "read_tsv");
  ReadReport local;
  ReadReport& out = fresh_report(report, local, path);
  const std::string content = read_file_or_throw(path);
  RecordCollector records(path, options, out);
  size_t line_number = 0;
  for (size_t start = 0; start < content.size();) {
    const TextLine line = line_at(content, start);
    ++line_number;
    if (!line.text.empty()) records.add(split_tabs(line.text), line_number);
    start = line.next;
  }
  return records.finish();
}

std::vector<LabelledText> read_csv(const std::string& path, const TextReadOptions& options, ReadReport* report) {
  check_columns(options, "read_csv");
  ReadReport local;
  ReadReport& out = fresh_report(report, local, path);
  const std::string content = read_file_or_throw(path);
  RecordCollector records(path, options, out);
  size_t position = 0, line = 1;
  while (position < content.size()) {
    const std::string_view rest = std::string_view(content).substr(position);
    if (rest.starts_with('\n') || rest.starts_with('\r')) {  // a blank line
      position = after_line_end(content, position);
      ++line;
      continue;
    }
    CsvRecord record = scan_csv_record(content, position, line);
    if (record.error.empty())
      records.add(std::move(record.fields), line);
    else
      records.bad(line, record.error);
    position = record.next;
    line = record.next_line;
  }
  return records.finish();
}

std::vector<LabelledText> read_aclimdb(const std::string& root, const std::string& split,
                                       const TextReadOptions& options, ReadReport* report) {
  LOOM_CHECK(split == "train" || split == "test", ValueError,
             "read_aclimdb: split must be \"train\" or \"test\", got \"", split, "\"");
  ReadReport local;
  ReadReport& out = fresh_report(report, local, (fs::path(root) / split).string());
  std::vector<LabelledText> records;
  for (const char* label : {"neg", "pos"}) {
    const fs::path dir = fs::path(root) / split / label;
    std::error_code ec;
    LOOM_CHECK(fs::is_directory(dir, ec), DataError, dir.string(),
               ": missing directory (read_aclimdb expects root/{train,test}/{neg,pos}/*.txt)");
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      // Anything named *.txt but a directory: a file that cannot be read is a bad record.
      const fs::path& p = it->path();
      std::error_code ignored;
      if (p.extension() == ".txt" && !it->is_directory(ignored)) names.push_back(p.filename().string());
    }
    LOOM_CHECK(!ec, DataError, dir.string(), ": cannot list the directory: ", ec.message());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string file = (dir / name).string();
      std::string text, why;
      if (!read_whole_file(file, text, why)) {
        out.bad_record(options.on_bad, file, 1, why);
        continue;
      }
      if (const auto at = first_invalid_utf8_byte(text)) {
        out.bad_record(options.on_bad, file, 1, "invalid UTF-8 at byte " + std::to_string(*at));
        continue;
      }
      records.push_back({label, replace_all(text, "<br />", " "), 1});
    }
  }
  out.records = records.size();
  LOOM_CHECK(!records.empty(), DataError, out.source, ": no reviews (", out.skipped, " bad files skipped)");
  return records;
}

std::vector<LabelledText> read_labelled_text(const std::string& path, const TextReadOptions& options,
                                             ReadReport* report) {
  std::error_code ec;
  LOOM_CHECK(!fs::is_directory(path, ec), ValueError, "read_labelled_text: ", path,
             " is a directory; for the aclImdb layout call read_aclimdb(\"", path, "\", \"train\") or (..., \"test\")");
  if (lower_ascii(fs::path(path).extension().string()) == ".csv") return read_csv(path, options, report);
  return read_tsv(path, options, report);
}

// ---- LabelSet -------------------------------------------------------------------------------

LabelSet::LabelSet(std::vector<std::string> names) : names_(std::move(names)) {
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
}

LabelSet LabelSet::from(const std::vector<LabelledText>& records) {
  std::vector<std::string> names;
  names.reserve(records.size());
  for (const LabelledText& r : records) names.push_back(r.label);
  return LabelSet(std::move(names));
}

bool LabelSet::contains(const std::string& name) const {
  return std::binary_search(names_.begin(), names_.end(), name);
}

int64_t LabelSet::id(const std::string& name) const {
  const auto it = std::lower_bound(names_.begin(), names_.end(), name);
  if (it != names_.end() && *it == name) return it - names_.begin();
  // A few of the known labels, each quoted short, so the message stays short however many
  // labels there are and however long they are.
  constexpr size_t kListed = 5;
  std::string known;
  for (size_t i = 0; i < names_.size() && i < kListed; ++i) known += (i > 0 ? ", " : "") + quote_excerpt(names_[i]);
  if (names_.size() > kListed) known += " and " + std::to_string(names_.size() - kListed) + " more";
  throw ValueError("LabelSet: unknown label " + quote_excerpt(name) + " (known: " + (known.empty() ? "none" : known) + ")");
}

const std::string& LabelSet::name(int64_t id) const {
  LOOM_CHECK(id >= 0 && id < static_cast<int64_t>(names_.size()), IndexError, "LabelSet::name: id ", id,
             " is out of range for ", names_.size(), " labels");
  return names_[static_cast<size_t>(id)];
}

}  // namespace loom::data
