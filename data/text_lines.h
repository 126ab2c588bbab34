// What every text reader (read_tsv, read_csv, read_csv_columns, Vocab::load) agrees on
// about a file's bytes: where lines end, the byte-order mark, and how much of a bad piece
// of text an error message quotes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace loom::data {

// Files from Windows, old Mac editors and Unix all read the same: a line ends at "\n",
// "\r\n" or a lone "\r" (as Python's universal newlines).
struct TextLine {
  std::string_view text;  // without its line end
  size_t next = 0;        // where the next line starts (text.size() at the end)
};
TextLine line_at(std::string_view content, size_t at);

// content without a UTF-8 byte-order mark (EF BB BF) at its start, which editors on
// Windows write and which would otherwise stick to the first field.
std::string_view strip_utf8_bom(std::string_view content);

// text quoted for an error message: 'text' when it has at most kMaxQuoted bytes, else its
// first kMaxQuoted bytes (never cutting a UTF-8 character) as 'abc...' (52428800 bytes),
// so that a huge bad cell does not make a huge message.
constexpr size_t kMaxQuoted = 80;
std::string quote_excerpt(std::string_view text);

}  // namespace loom::data
