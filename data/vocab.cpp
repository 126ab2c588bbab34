// Vocab: building from a corpus, lookups, and the one-token-per-line file format.
#include "data/vocab.h"

#include <algorithm>

#include "core/error.h"
#include "core/safetensors.h"
#include "data/text_lines.h"

namespace loom::data {

namespace {

// Why token cannot be stored in a vocab file (one token per line), or nullptr if it can.
const char* why_unstorable(std::string_view token) {
  if (token.empty()) return "is empty";
  if (!is_valid_utf8(token)) return "is not valid UTF-8";
  if (token.find_first_of("\t\n\r") != std::string_view::npos) return "holds a tab, newline or carriage return";
  return nullptr;
}

}  // namespace

Vocab::Vocab() {
  add(std::string(kPadToken));
  add(std::string(kUnkToken));
}

void Vocab::add(std::string token) {
  ids_.emplace(token, static_cast<int64_t>(tokens_.size()));
  tokens_.push_back(std::move(token));
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& corpus, size_t min_freq,
                   std::optional<size_t> max_size) {
  LOOM_CHECK(!max_size || *max_size >= 2, ValueError, "Vocab::build: max_size ", max_size.value_or(0),
             " leaves no room for <pad> and <unk>, which it counts (use at least 2)");
  // Views into corpus, which outlives this function.
  std::unordered_map<std::string_view, size_t> counts;
  for (const auto& sentence : corpus)
    for (const std::string& token : sentence) ++counts[token];

  std::vector<std::pair<std::string_view, size_t>> ranked;
  for (const auto& [token, count] : counts) {
    const char* why = why_unstorable(token);
    LOOM_CHECK(why == nullptr, ValueError, "Vocab::build: the corpus token '", token, "' ", why,
               " and could not be saved one per line");
    if (token == kPadToken || token == kUnkToken) continue;
    if (count >= std::max<size_t>(min_freq, 1)) ranked.emplace_back(token, count);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  const size_t keep = max_size ? std::min(ranked.size(), *max_size - 2) : ranked.size();
  Vocab vocab;
  vocab.tokens_.reserve(keep + 2);
  for (size_t i = 0; i < keep; ++i) vocab.add(std::string(ranked[i].first));
  return vocab;
}

int64_t Vocab::index(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? kUnk : it->second;
}

bool Vocab::contains(std::string_view token) const { return ids_.find(token) != ids_.end(); }

const std::string& Vocab::token(int64_t id) const {
  LOOM_CHECK(id >= 0 && id < static_cast<int64_t>(tokens_.size()), IndexError, "Vocab::token: id ", id,
             " is out of range for a vocab of size ", tokens_.size());
  return tokens_[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocab::encode(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const std::string& t : tokens) ids.push_back(index(t));
  return ids;
}

std::vector<int64_t> Vocab::encode(std::string_view text, const TokenizerOptions& options) const {
  return encode(tokenize(text, options));
}

std::string Vocab::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += token(ids[i]);
  }
  return text;
}

void Vocab::save(const std::string& path) const {
  std::string content;
  for (const std::string& t : tokens_) content += t + '\n';
  write_file_atomically(path, content, "Vocab::save");  // removes the temporaries of killed saves too
}

Vocab Vocab::load(const std::string& path) {
  std::string bytes;
  const std::string unreadable = read_regular_file(path, bytes);
  LOOM_CHECK(unreadable.empty(), DataError, path, ": cannot read the vocab file: ", unreadable);
  const std::string_view content = strip_utf8_bom(bytes);

  Vocab vocab;  // the specials, which the file must list first
  size_t number = 0;
  const auto fail = [&](size_t at, const std::string& why) {
    throw DataError(path + ":" + std::to_string(at) + ": " + why);
  };
  for (size_t position = 0; position < content.size();) {  // lines end in "\n", "\r\n" or "\r"
    const TextLine next = line_at(content, position);
    position = next.next;
    std::string line(next.text);
    ++number;
    if (number <= 2) {
      const std::string_view expected = number == 1 ? kPadToken : kUnkToken;
      if (line != expected)
        fail(number, "expected " + std::string(expected) + " (a vocab file starts with <pad> and <unk>)");
      continue;
    }
    if (line.empty()) fail(number, "empty line (every line after <unk> holds one token)");
    if (const char* why = why_unstorable(line)) fail(number, std::string("the token ") + why);
    if (const auto it = vocab.ids_.find(line); it != vocab.ids_.end())
      fail(number, "duplicate token " + quote_excerpt(line) + " (first on line " + std::to_string(it->second + 1) + ")");
    vocab.add(std::move(line));
  }
  if (number == 0) fail(1, "empty vocab file (expected <pad> and <unk> on the first two lines)");
  if (number == 1) fail(2, "missing <unk> (a vocab file starts with <pad> and <unk>)");
  return vocab;
}

std::vector<int64_t> pad_or_truncate(std::vector<int64_t> ids, size_t length, int64_t pad) {
  ids.resize(length, pad);
  return ids;
}

}  // namespace loom::data
