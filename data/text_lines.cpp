// Line ends, the byte-order mark and quoted excerpts; see data/text_lines.h.
#include "data/text_lines.h"

#include <algorithm>

namespace loom::data {

TextLine line_at(std::string_view content, size_t at) {
  const size_t end = content.find_first_of("\r\n", at);
  if (end == std::string_view::npos) return {content.substr(at), content.size()};
  const bool crlf = content[end] == '\r' && end + 1 < content.size() && content[end + 1] == '\n';
  return {content.substr(at, end - at), end + (crlf ? 2 : 1)};
}

std::string_view strip_utf8_bom(std::string_view content) {
  if (content.starts_with("\xEF\xBB\xBF")) content.remove_prefix(3);
  return content;
}

std::string quote_excerpt(std::string_view text) {
  size_t cut = std::min(text.size(), kMaxQuoted);
  while (cut < text.size() && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;  // text[cut] continues a UTF-8 character: cut before the character
  std::string out(1, '\'');
  out.append(text.substr(0, cut));
  if (cut < text.size()) out.append("...");
  out.push_back('\'');
  if (cut < text.size()) out.append(" (" + std::to_string(text.size()) + " bytes)");
  return out;
}

}  // namespace loom::data
