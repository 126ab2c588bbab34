// A basic English word tokenizer (torchtext's "basic_english", UTF-8 aware) and a UTF-8
// validator.
//
//   tokenize("Don't PANIC, it's 42!")  ->  {"don't", "panic", ",", "it's", "42", "!"}
//
// Rules, in order:
//  - text is split on whitespace: ASCII space, \t \n \v \f \r and the Unicode spaces
//    (U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000);
//  - with lower, ASCII A-Z and the Latin-1 capitals À..Þ (but not ×) become lower case;
//    other scripts are left as they are;
//  - with split_punctuation, each ASCII punctuation character (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)
//    is a token of its own, except an apostrophe with a letter, digit or non-ASCII
//    character on both sides, which stays inside its word: "don't" is one token, while
//    the quotes in "'tis" or "''Conan''" are split off. Non-ASCII punctuation (“ ” — …)
//    is not split off;
//  - a multi-byte UTF-8 character is never cut: tokens are always valid UTF-8.
// Invalid UTF-8 is a ValueError naming the byte offset; the file readers check validity
// first and report the file and line instead.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

struct TokenizerOptions {
  bool lower = true;
  bool split_punctuation = true;
};

std::vector<std::string> tokenize(std::string_view text, const TokenizerOptions& options = {});

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF, no stray or missing continuation bytes.
bool is_valid_utf8(std::string_view text);

// The byte offset where text stops being valid UTF-8, or nullopt when all of it is valid.
std::optional<size_t> first_invalid_utf8_byte(std::string_view text);

}  // namespace loom::data
