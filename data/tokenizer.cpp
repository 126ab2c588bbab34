// The word tokenizer and the UTF-8 validator (see data/tokenizer.h for the rules).
#include "data/tokenizer.h"

#include "core/error.h"

namespace loom::data {

namespace {

// One decoded UTF-8 character: its code point and how many bytes it took (0 = malformed).
struct CodePoint {
  char32_t value = 0;
  size_t length = 0;
};

// Decodes the character starting at text[i]. The lead byte fixes the length; the value
// must then need that many bytes (no overlong forms) and be a scalar value (not a
// surrogate, at most U+10FFFF).
CodePoint decode_at(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {lead, 1};
  size_t length;
  char32_t value, smallest;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, value = lead & 0x1F, smallest = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, value = lead & 0x0F, smallest = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, value = lead & 0x07, smallest = 0x10000;
  } else {
    return {};  // a continuation byte, C0/C1 (always overlong) or F5..FF (beyond U+10FFFF)
  }
  if (text.size() - i < length) return {};  // truncated at the end of the text
  for (size_t k = 1; k < length; ++k) {
    const unsigned char c = byte(i + k);
    if ((c & 0xC0) != 0x80) return {};
    value = (value << 6) | (c & 0x3F);
  }
  const bool surrogate = value >= 0xD800 && value <= 0xDFFF;
  if (value < smallest || value > 0x10FFFF || surrogate) return {};
  return {value, length};
}

bool is_whitespace(char32_t c) {
  switch (c) {
    case ' ': case '\t': case '\n': case '\v': case '\f': case '\r':
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

// The C locale's ispunct, spelled out so a program's setlocale cannot change it.
bool is_ascii_punctuation(char32_t c) {
  constexpr std::string_view kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  return c < 0x80 && kPunctuation.find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Whether text[i] starts a letter, digit or non-ASCII non-space character: what must
// follow an apostrophe for it to stay inside its word.
bool starts_word_character(std::string_view text, size_t i) {
  if (i >= text.size()) return false;
  const CodePoint next = decode_at(text, i);
  if (next.length == 0) return false;  // the main loop reports it
  return next.value < 0x80 ? is_ascii_alnum(next.value) : !is_whitespace(next.value);
}

// Appends one character's bytes to word, lower-casing A-Z and Latin-1 À..Þ (U+00C0..U+00DE,
// bytes C3 80..C3 9E) except × (C3 97): their lower-case forms are 0x20 further on.
void append_character(std::string& word, std::string_view bytes, bool lower) {
  if (!lower) {
    word += bytes;
    return;
  }
  const auto b0 = static_cast<unsigned char>(bytes[0]);
  if (bytes.size() == 1 && b0 >= 'A' && b0 <= 'Z') {
    word += static_cast<char>(b0 + 0x20);
    return;
  }
  if (bytes.size() == 2 && b0 == 0xC3) {
    const auto b1 = static_cast<unsigned char>(bytes[1]);
    if (b1 >= 0x80 && b1 <= 0x9E && b1 != 0x97) {
      word += bytes[0];
      word += static_cast<char>(b1 + 0x20);
      return;
    }
  }
  word += bytes;
}

}  // namespace

std::optional<size_t> first_invalid_utf8_byte(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const CodePoint c = decode_at(text, i);
    if (c.length == 0) return i;
    i += c.length;
  }
  return std::nullopt;
}

bool is_valid_utf8(std::string_view text) { return !first_invalid_utf8_byte(text).has_value(); }

std::vector<std::string> tokenize(std::string_view text, const TokenizerOptions& options) {
  std::vector<std::string> tokens;
  std::string word;
  const auto end_word = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < text.size();) {
    const CodePoint c = decode_at(text, i);
    LOOM_CHECK(c.length > 0, ValueError, "tokenize: invalid UTF-8 at byte offset ", i);
    if (is_whitespace(c.value)) {
      end_word();
    } else if (options.split_punctuation && is_ascii_punctuation(c.value)) {
      const bool inside_word = c.value == '\'' && !word.empty() && starts_word_character(text, i + 1);
      if (inside_word) {
        word += '\'';
      } else {
        end_word();
        tokens.emplace_back(1, static_cast<char>(c.value));
      }
    } else {
      append_character(word, text.substr(i, c.length), options.lower);
    }
    i += c.length;
  }
  end_word();
  return tokens;
}

}  // namespace loom::data
