// Vocab: the token <-> id table of a text model, as torchtext's Vocab.
//
//   Vocab vocab = Vocab::build(tokenized_corpus, /*min_freq=*/2, /*max_size=*/20000);
//   std::vector<int64_t> ids = vocab.encode("A fine film.");  // unknown words -> <unk>
//   vocab.save("vocab.txt");  ...  Vocab again = Vocab::load("vocab.txt");
//
// Ids 0 and 1 are always the specials <pad> and <unk>; the other tokens follow by
// descending frequency, ties in byte-wise alphabetical order, so the same corpus always
// gives the same ids. max_size counts the two specials, as torchtext's max_tokens does:
// max_size = 10 keeps <pad>, <unk> and the 8 most frequent tokens.
//
// The file format is one token per line in id order, starting "<pad>\n<unk>\n" (what
// torchtext users write by hand). Tokens are non-empty valid UTF-8 without \t, \n or \r,
// which build checks, so every Vocab survives save -> load unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace loom::data {

class Vocab {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kUnk = 1;
  static constexpr std::string_view kPadToken = "<pad>";
  static constexpr std::string_view kUnkToken = "<unk>";

  // Only the two specials.
  Vocab();

  // Tokens seen at least min_freq times (0 acts as 1), most frequent first, at most
  // max_size ids in all (>= 2). "<pad>" and "<unk>" in the corpus map to the specials.
  // ValueError for a token that is empty, not UTF-8, or holds \t, \n or \r.
  static Vocab build(const std::vector<std::vector<std::string>>& corpus, size_t min_freq = 1,
                     std::optional<size_t> max_size = {});

  size_t size() const { return tokens_.size(); }
  int64_t index(std::string_view token) const;  // kUnk for a token not in the vocab
  const std::string& token(int64_t id) const;   // IndexError out of range
  bool contains(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return tokens_; }  // in id order

  std::vector<int64_t> encode(const std::vector<std::string>& tokens) const;
  std::vector<int64_t> encode(std::string_view text, const TokenizerOptions& options = {}) const;
  // The tokens of ids joined by single spaces; <pad> ids are kept, as in torchtext's
  // lookup_tokens. IndexError for an id out of range.
  std::string decode(const std::vector<int64_t>& ids) const;

  // Writes atomically, as save_safetensors does (core/safetensors.h): an existing file at
  // path is either replaced whole or left as it was, and the temporaries that saves killed
  // mid-write left beside path are removed. SerializationError naming path if that fails.
  void save(const std::string& path) const;
  // Treats the file as hostile: DataError "path:line: why" for an empty file, a first line
  // other than <pad> or second other than <unk>, an empty line, invalid UTF-8, a tab, or
  // a token listed twice; DataError "path: why" when it cannot be opened. CRLF is accepted.
  static Vocab load(const std::string& path);

 private:
  // Transparent hashing, so index(string_view) looks up without building a std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void add(std::string token);

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
};

// ids cut to length, or extended with pad to it.
std::vector<int64_t> pad_or_truncate(std::vector<int64_t> ids, size_t length, int64_t pad = 0);

}  // namespace loom::data
