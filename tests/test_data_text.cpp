// Tests for the text half of the data pipeline: the tokenizer and UTF-8 validator, Vocab
// (ordering, limits, the file format and its corrupt variants), the TSV / CSV / aclImdb
// readers on small hostile files and on the bundled movie_snippets.tsv, LabelSet,
// TextClassificationDataset, collate_text and split_train_test, each against hand-written
// expectations or a plain-loop reference.
#include "catch2_compat.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "data/text_dataset.h"
#include "data/text_lines.h"
#include "data/text_readers.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
#include "test_util.h"

using namespace loom;
using namespace loom::data;
namespace fs = std::filesystem;
using Tokens = std::vector<std::string>;

namespace {

using loom::test::message_of;
using loom::test::TempDir;

// UTF-8 bytes of a code point, written out by hand from RFC 3629 (even for surrogates,
// which are then not valid).
std::string encode_utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// Table 3-7 of the Unicode standard (well-formed UTF-8 byte sequences), as an independent
// reference validator: for each lead byte range, the allowed range of the second byte.
bool reference_valid_utf8(const std::string& s) {
  size_t i = 0;
  const auto in = [&](size_t k, unsigned lo, unsigned hi) {
    return k < s.size() && (unsigned char)s[k] >= lo && (unsigned char)s[k] <= hi;
  };
  while (i < s.size()) {
    const unsigned b = (unsigned char)s[i];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (b <= 0x7F) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b == 0xE0) n = 3, lo = 0xA0;
    else if (b == 0xED) n = 3, hi = 0x9F;
    else if (b >= 0xE1 && b <= 0xEF) n = 3;
    else if (b == 0xF0) n = 4, lo = 0x90;
    else if (b == 0xF4) n = 4, hi = 0x8F;
    else if (b >= 0xF1 && b <= 0xF3) n = 4;
    else return false;
    if (n > 1 && !in(i + 1, lo, hi)) return false;
    for (size_t k = 2; k < n; ++k)
      if (!in(i + k, 0x80, 0xBF)) return false;
    i += n;
  }
  return true;
}

std::vector<LabelledText> records_of(std::vector<std::pair<std::string, std::string>> rows) {
  std::vector<LabelledText> out;
  for (size_t i = 0; i < rows.size(); ++i) out.push_back({rows[i].first, rows[i].second, i + 1});
  return out;
}

}  // namespace

// ---- tokenizer ------------------------------------------------------------------------------

TEST_CASE("tokenize: lower-casing, punctuation and apostrophes", "[data][text]") {
  CHECK(tokenize("Don't PANIC, it's 42!") == Tokens{"don't", "panic", ",", "it's", "42", "!"});
  CHECK(tokenize("''Conan'' and 'tis rock 'n' roll") ==
        Tokens{"'", "'", "conan", "'", "'", "and", "'", "tis", "rock", "'", "n", "'", "roll"});
  CHECK(tokenize("co-writer/director J.R.R. Tolkien's") ==
        Tokens{"co", "-", "writer", "/", "director", "j", ".", "r", ".", "r", ".", "tolkien's"});
  CHECK(tokenize("(a)[b]{c}<d>\"e\"") ==
        Tokens{"(", "a", ")", "[", "b", "]", "{", "c", "}", "<", "d", ">", "\"", "e", "\""});
  CHECK(tokenize("  \t\r\n ").empty());
  CHECK(tokenize("").empty());
  CHECK(tokenize("Hello, World!", {.lower = false}) == Tokens{"Hello", ",", "World", "!"});
  CHECK(tokenize("Hello, World!", {.split_punctuation = false}) == Tokens{"hello,", "world!"});
}

TEST_CASE("tokenize: UTF-8 characters are never split and Latin-1 capitals are lowered", "[data][text]") {
  CHECK(tokenize("Café ÉCOLE naïve") == Tokens{"café", "école", "naïve"});
  CHECK(tokenize("ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞ") == Tokens{"àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþ"});
  CHECK(tokenize("× ß ΑΒΓ") == Tokens{"×", "ß", "ΑΒΓ"});  // not Latin-1 capitals: unchanged
  CHECK(tokenize("日本語のテキスト、東京。") == Tokens{"日本語のテキスト、東京。"});
  CHECK(tokenize("日本\u3000語") == Tokens{"日本", "語"});  // ideographic space
  CHECK(tokenize("a\u00A0b\u2003c\u2028d") == Tokens{"a", "b", "c", "d"});
  CHECK(tokenize("I ❤️ 🍕!") == Tokens{"i", "❤️", "🍕", "!"});
  CHECK(tokenize("l'été d'août") == Tokens{"l'été", "d'août"});
  CHECK(tokenize("🍕'🍕") == Tokens{"🍕'🍕"});  // a non-ASCII character counts as a letter

  // Random strings from a pool of 1- to 4-byte characters: every token is valid UTF-8, and
  // (without lower-casing) the tokens concatenate back to the input without its spaces.
  const std::vector<std::string> pool = {"a", "Z", "7", "'", ",", "-", "é", "É", "日", "🍕", " ",
                                         "\t", "\u3000", "\u00A0", "\n"};
  const auto is_space = [](const std::string& c) {
    return c == " " || c == "\t" || c == "\u3000" || c == "\u00A0" || c == "\n";
  };
  std::mt19937 gen(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text, expected;
    const int n = int(gen() % 30);
    for (int k = 0; k < n; ++k) {
      const std::string& c = pool[gen() % pool.size()];
      text += c;
      if (!is_space(c)) expected += c;
    }
    std::string joined;
    for (const std::string& t : tokenize(text, {.lower = false})) {
      REQUIRE(!t.empty());
      REQUIRE(is_valid_utf8(t));
      joined += t;
    }
    REQUIRE(joined == expected);
  }
}

TEST_CASE("tokenize: invalid UTF-8 is a ValueError naming the byte offset", "[data][text]") {
  REQUIRE_THROWS_AS(tokenize("ab\xFF"), ValueError);
  CHECK_THAT(message_of<ValueError>([] { tokenize("caf\xC3"); }), Catch::Contains("byte offset 3"));
  CHECK_THAT(message_of<ValueError>([] { tokenize("ok \xED\xA0\x80"); }), Catch::Contains("byte offset 3"));
}

TEST_CASE("is_valid_utf8: hand-picked sequences", "[data][text]") {
  for (const std::string s : {"", "abc", "é", "日本", "🍕", "\xF4\x8F\xBF\xBF" /* U+10FFFF */,
                              "\xED\x9F\xBF" /* U+D7FF */, "\xEE\x80\x80" /* U+E000 */})
    CHECK(is_valid_utf8(s));
  CHECK(is_valid_utf8(std::string("a\0b", 3)));  // U+0000 is a character
  const std::vector<std::string> invalid = {
      "\x80",             "\xBF",             // a continuation byte alone
      "\xC0\x80",         "\xC1\xBF",         // overlong 2-byte
      "\xE0\x80\x80",     "\xE0\x9F\xBF",     // overlong 3-byte
      "\xF0\x8F\xBF\xBF",                     // overlong 4-byte
      "\xED\xA0\x80",     "\xED\xBF\xBF",     // surrogates U+D800, U+DFFF
      "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", // above U+10FFFF
      "\xFE",             "\xFF",
      "\xC3",             "\xE6\x97",         "\xF0\x9F\x8D",  // truncated
      "\xC3" "A",         "\xE6\x97" "A",     // a missing continuation byte
  };
  for (const std::string& s : invalid) {
    INFO("sequence of " << s.size() << " bytes");
    CHECK_FALSE(is_valid_utf8(s));
    CHECK_FALSE(is_valid_utf8("ok " + s));
  }
  CHECK(first_invalid_utf8_byte("ab\xC3") == std::optional<size_t>(2));
  CHECK(first_invalid_utf8_byte("日本\xFF") == std::optional<size_t>(6));
  CHECK(first_invalid_utf8_byte("日本") == std::nullopt);
}

TEST_CASE("is_valid_utf8: every code point, and all short byte strings against Table 3-7", "[data][text]") {
  // Every scalar value encodes to valid UTF-8; every surrogate to invalid; and the overlong
  // 2-byte form of each ASCII character is invalid.
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    const bool surrogate = c >= 0xD800 && c <= 0xDFFF;
    if (is_valid_utf8(encode_utf8(c)) == surrogate) FAIL("code point " << uint32_t(c));
  }
  for (char32_t c = 0; c < 0x80; ++c)
    REQUIRE_FALSE(is_valid_utf8(std::string{char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))}));
  // All 1- and 2-byte strings, all 3-byte strings that start with a lead byte, and random
  // 4-byte strings starting F0..F5, against the table.
  for (unsigned a = 0; a < 256; ++a) {
    REQUIRE(is_valid_utf8(std::string{char(a)}) == reference_valid_utf8(std::string{char(a)}));
    for (unsigned b = 0; b < 256; ++b) {
      const std::string two{char(a), char(b)};
      if (is_valid_utf8(two) != reference_valid_utf8(two)) FAIL("bytes " << a << " " << b);
    }
  }
  for (unsigned a = 0xE0; a <= 0xEF; ++a)
    for (unsigned b = 0x70; b < 0xD0; ++b)
      for (unsigned c = 0x70; c < 0xD0; ++c) {
        const std::string three{char(a), char(b), char(c)};
        if (is_valid_utf8(three) != reference_valid_utf8(three)) FAIL("bytes " << a << " " << b << " " << c);
      }
  std::mt19937 gen(3);
  for (int trial = 0; trial < 200000; ++trial) {
    const std::string four{char(0xF0 + gen() % 6), char(0x70 + gen() % 0x60), char(0x70 + gen() % 0x60),
                           char(0x70 + gen() % 0x60)};
    if (is_valid_utf8(four) != reference_valid_utf8(four)) FAIL("a 4-byte string, trial " << trial);
  }
}

// ---- Vocab ----------------------------------------------------------------------------------

TEST_CASE("Vocab::build: specials, frequency order, ties, min_freq, max_size", "[data][text]") {
  const std::vector<Tokens> corpus = {{"b", "a", "c", "a", "<unk>"}, {"b", "a", "d", "e", "e"}};
  // counts: a 3, b 2, e 2, c 1, d 1 ("<unk>" is the special, not a new token)
  const Vocab all = Vocab::build(corpus);
  CHECK(all.tokens() == Tokens{"<pad>", "<unk>", "a", "b", "e", "c", "d"});
  CHECK(Vocab::build(corpus, 2).tokens() == Tokens{"<pad>", "<unk>", "a", "b", "e"});
  CHECK(Vocab::build(corpus, 0).tokens() == all.tokens());
  CHECK(Vocab::build(corpus, 1, 4).tokens() == Tokens{"<pad>", "<unk>", "a", "b"});  // counts the specials
  CHECK(Vocab::build(corpus, 1, 2).tokens() == Tokens{"<pad>", "<unk>"});
  CHECK(Vocab::build(corpus, 1, 100).size() == 7);
  CHECK(Vocab::build({}).tokens() == Tokens{"<pad>", "<unk>"});
  CHECK(Vocab().tokens() == Tokens{"<pad>", "<unk>"});
  REQUIRE_THROWS_AS(Vocab::build(corpus, 1, 1), ValueError);
  CHECK_THAT(message_of<ValueError>([] { Vocab::build({{"ok", "a\tb"}}); }), Catch::Contains("'a\tb'"));
  REQUIRE_THROWS_AS(Vocab::build({{""}}), ValueError);
  REQUIRE_THROWS_AS(Vocab::build({{"x\ny"}}), ValueError);
  REQUIRE_THROWS_AS(Vocab::build({{"\xFF"}}), ValueError);

  // A random Zipf-like corpus against a reference: count in a std::map (alphabetical), then
  // stable-sort by descending count.
  std::mt19937 gen(5);
  std::vector<Tokens> random_corpus(50);
  for (Tokens& sentence : random_corpus)
    for (int k = 0; k < 40; ++k) sentence.push_back("w" + std::to_string((gen() % 60) * (gen() % 60) / 60));
  std::map<std::string, size_t> counts;
  for (const Tokens& s : random_corpus)
    for (const std::string& t : s) ++counts[t];
  std::vector<std::pair<std::string, size_t>> ranked(counts.begin(), counts.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.second > b.second; });
  Tokens expected = {"<pad>", "<unk>"};
  for (const auto& [token, count] : ranked)
    if (count >= 3 && expected.size() < 20) expected.push_back(token);
  CHECK(Vocab::build(random_corpus, 3, 20).tokens() == expected);
}

TEST_CASE("Vocab: lookups, encode and decode", "[data][text]") {
  const Vocab vocab = Vocab::build({{"the", "film", "the", "was", "fine", "."}});
  // the 2; then ".", "film", "fine", "was" alphabetically
  REQUIRE(vocab.tokens() == Tokens{"<pad>", "<unk>", "the", ".", "film", "fine", "was"});
  CHECK(vocab.index("the") == 2);
  CHECK(vocab.index("absent") == Vocab::kUnk);
  CHECK(vocab.index("<pad>") == Vocab::kPad);
  CHECK(vocab.contains("film"));
  CHECK_FALSE(vocab.contains("Film"));
  CHECK(vocab.token(4) == "film");
  REQUIRE_THROWS_AS(vocab.token(-1), IndexError);
  REQUIRE_THROWS_AS(vocab.token(7), IndexError);
  CHECK(vocab.encode(Tokens{"the", "dull", "film"}) == std::vector<int64_t>{2, 1, 4});
  CHECK(vocab.encode("The film was DULL.") == std::vector<int64_t>{2, 4, 6, 1, 3});
  CHECK(vocab.decode({2, 4, 6, 1, 3, 0}) == "the film was <unk> . <pad>");
  CHECK(vocab.decode({}).empty());
  REQUIRE_THROWS_AS(vocab.decode({2, 99}), IndexError);

  CHECK(pad_or_truncate({5, 6, 7}, 5) == std::vector<int64_t>{5, 6, 7, 0, 0});
  CHECK(pad_or_truncate({5, 6, 7}, 2) == std::vector<int64_t>{5, 6});
  CHECK(pad_or_truncate({5, 6, 7}, 4, -1) == std::vector<int64_t>{5, 6, 7, -1});
  CHECK(pad_or_truncate({}, 0).empty());
}

TEST_CASE("Vocab: save -> load round trip, atomically", "[data][text]") {
  TempDir dir;
  const Vocab vocab = Vocab::build({{"café", "日本", "🍕", "don't", "café", "<", ">"}, {"a"}});
  const std::string path = dir.write("vocab.txt", "old contents");
  vocab.save(path);
  CHECK(dir.names() == Tokens{"vocab.txt"});  // replaced, no temporary file left behind
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes == "<pad>\n<unk>\ncafé\n<\n>\na\ndon't\n日本\n🍕\n");
  const Vocab loaded = Vocab::load(path);
  CHECK(loaded.tokens() == vocab.tokens());
  CHECK(loaded.index("🍕") == vocab.index("🍕"));
  CHECK(Vocab::load(dir.write("crlf.txt", "<pad>\r\n<unk>\r\nx\r\ny")).tokens() == Tokens{"<pad>", "<unk>", "x", "y"});
  // A save that cannot happen (no such folder) is an error and leaves nothing behind.
  REQUIRE_THROWS_AS(vocab.save((dir.path / "missing" / "v.txt").string()), SerializationError);
  CHECK(dir.names() == Tokens{"crlf.txt", "vocab.txt"});
}

TEST_CASE("Vocab::save removes the temporaries of killed saves to the same path", "[data][text]") {
  TempDir dir;
  // A pid that is certainly dead: a child that has exited and been reaped.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  const std::string dead = std::to_string(child), live = std::to_string(getppid());
  dir.write("vocab.txt.tmp." + dead + ".0", "<pad>\n<un");  // what a save killed mid-write leaves
  dir.write("vocab.txt.tmp." + live + ".0", "in progress");
  dir.write("other.txt.tmp." + dead + ".0", "another file's");
  Vocab().save(dir.file("vocab.txt"));
  CHECK(dir.names() == Tokens{"other.txt.tmp." + dead + ".0", "vocab.txt", "vocab.txt.tmp." + live + ".0"});
  CHECK(Vocab::load(dir.file("vocab.txt")).size() == 2);
}

TEST_CASE("Vocab::load: each corrupt file is a DataError naming file and line", "[data][text]") {
  TempDir dir;
  struct Case {
    std::string contents, where, why;
  };
  const std::vector<Case> cases = {
      {"", "bad.txt:1:", "empty"},
      {"<unk>\n<pad>\n", "bad.txt:1:", "<pad>"},
      {"<pad>\n", "bad.txt:2:", "<unk>"},
      {"<pad>\nword\n", "bad.txt:2:", "<unk>"},
      {"<pad>\n<unk>\na\n\nb\n", "bad.txt:4:", "empty line"},
      {"<pad>\n<unk>\na\nb\xFF\n", "bad.txt:4:", "UTF-8"},
      {"<pad>\n<unk>\na\nb\nc\na\n", "bad.txt:6:", "duplicate token 'a' (first on line 3)"},
      {"<pad>\n<unk>\na\n<unk>\n", "bad.txt:4:", "duplicate token '<unk>' (first on line 2)"},
      {"<pad>\n<unk>\nthe\t120\n", "bad.txt:3:", "tab"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.write("bad.txt", c.contents);
    INFO(c.where << " " << c.why);
    REQUIRE_THROWS_AS(Vocab::load(path), DataError);
    CHECK_THAT(message_of<DataError>([&] { Vocab::load(path); }), Catch::Contains(c.where) && Catch::Contains(c.why));
  }
  const std::string missing = (dir.path / "nope.txt").string();
  CHECK_THAT(message_of<DataError>([&] { Vocab::load(missing); }), Catch::Contains(missing));
  REQUIRE_THROWS_AS(Vocab::load(dir.path.string()), DataError);
}

// ---- readers --------------------------------------------------------------------------------

TEST_CASE("read_tsv: records, CRLF, blank lines, header, chosen columns", "[data][text]") {
  TempDir dir;
  ReadReport report;
  const std::string clean = dir.write("clean.tsv", "pos\tA fine film.\r\nneg\tDull.\n\n neg \t\n");
  const auto got = read_tsv(clean, {}, &report);
  REQUIRE(got.size() == 3);
  CHECK((got[0].label == "pos" && got[0].text == "A fine film." && got[0].line == 1));
  CHECK((got[1].label == "neg" && got[1].text == "Dull." && got[1].line == 2));
  CHECK((got[2].label == "neg" && got[2].text.empty() && got[2].line == 4));  // label trimmed; empty text kept
  CHECK(report.source == clean);
  CHECK(report.records == 3);
  CHECK(report.skipped == 0);

  const auto swapped = read_tsv(dir.write("h.tsv", "text\tlabel\nGood.\tpos\nBad.\tneg"),
                                {.header = true, .label_column = 1, .text_column = 0});
  REQUIRE(swapped.size() == 2);
  CHECK((swapped[0].label == "pos" && swapped[0].text == "Good." && swapped[0].line == 2));
  CHECK((swapped[1].label == "neg" && swapped[1].text == "Bad." && swapped[1].line == 3));
  REQUIRE_THROWS_AS(read_tsv(clean, {.label_column = 1, .text_column = 1}), ValueError);
}

TEST_CASE("read_tsv / read_csv: lone CR line ends and a byte-order mark", "[data][text]") {
  TempDir dir;
  const auto labels_of = [](const std::vector<LabelledText>& got) {
    Tokens out;
    for (const LabelledText& r : got) out.push_back(r.label + "|" + r.text + "|" + std::to_string(r.line));
    return out;
  };
  // printf 'pos\tone\rneg\ttwo\r' (old Mac editors): two records, not one.
  CHECK(labels_of(read_tsv(dir.write("cr.tsv", "pos\tone\rneg\ttwo\r"))) == Tokens{"pos|one|1", "neg|two|2"});
  CHECK(labels_of(read_tsv(dir.write("mixed.tsv", "pos\ta\r\nneg\tb\rpos\tc\n\r\rneg\td"))) ==
        Tokens{"pos|a|1", "neg|b|2", "pos|c|3", "neg|d|6"});
  // CSV: a lone CR ends a record outside quotes and is kept inside them.
  CHECK(labels_of(read_csv(dir.write("cr.csv", "pos,one\rneg,\"two\rlines\"\r\rpos,three\r"))) ==
        Tokens{"pos|one|1", "neg|two\rlines|2", "pos|three|5"});
  // A UTF-8 byte-order mark is not part of the first label (nor of a header).
  const std::string bom = "\xEF\xBB\xBF";
  const auto tsv = read_tsv(dir.write("bom.tsv", bom + "pos\tone\nneg\ttwo\npos\tthree\n"));
  CHECK(LabelSet::from(tsv).names() == Tokens{"neg", "pos"});
  CHECK(labels_of(read_csv(dir.write("bom.csv", bom + "\"pos\",one\r\nneg,two\r\n"))) ==
        Tokens{"pos|one|1", "neg|two|2"});
  CHECK(labels_of(read_tsv(dir.write("bomh.tsv", bom + "label\ttext\npos\tone\n"), {.header = true})) ==
        Tokens{"pos|one|2"});
  // Only at the very start: elsewhere it is text.
  CHECK(read_tsv(dir.write("mid.tsv", "pos\t" + bom + "one\n"))[0].text == bom + "one");
}

TEST_CASE("error messages quote at most ~80 bytes of a huge bad token or label", "[data][text]") {
  TempDir dir;
  const std::string huge(1'000'000, 'x');
  const std::string vocab_msg =
      message_of<DataError>([&] { Vocab::load(dir.write("v.txt", "<pad>\n<unk>\n" + huge + "\n" + huge + "\n")); });
  CHECK(vocab_msg.size() < 300);
  CHECK_THAT(vocab_msg, Catch::Contains("v.txt:4: duplicate token 'xxxx") &&
                            Catch::Contains("x...' (1000000 bytes) (first on line 3)"));
  const LabelSet labels = LabelSet::from(records_of({{"pos", "a"}}));
  const std::string label_msg = message_of<ValueError>([&] { labels.id(huge); });
  CHECK(label_msg.size() < 300);
  CHECK_THAT(label_msg, Catch::Contains("(1000000 bytes)"));
  // The excerpt never cuts a UTF-8 character in two.
  std::string accents = "a";
  for (int i = 0; i < 100; ++i) accents += "é";
  const std::string quoted = quote_excerpt(accents);
  CHECK(is_valid_utf8(quoted));
  CHECK(quoted == "'" + accents.substr(0, 79) + "...' (201 bytes)");
  CHECK(quote_excerpt(std::string(80, 'y')) == "'" + std::string(80, 'y') + "'");
}

TEST_CASE("Vocab::load: lone CR line ends and a byte-order mark", "[data][text]") {
  TempDir dir;
  CHECK(Vocab::load(dir.write("cr.txt", "<pad>\r<unk>\rthe\rcat\r")).tokens() == Tokens{"<pad>", "<unk>", "the", "cat"});
  CHECK(Vocab::load(dir.write("bom.txt", "\xEF\xBB\xBF<pad>\n<unk>\nthe\n")).tokens() == Tokens{"<pad>", "<unk>", "the"});
  CHECK_THAT(message_of<DataError>([&] { Vocab::load(dir.write("blank.txt", "<pad>\r<unk>\ra\r\rb\r")); }),
             Catch::Contains("blank.txt:4:") && Catch::Contains("empty line"));
}

TEST_CASE("read_tsv: bad records under Throw and Skip", "[data][text]") {
  TempDir dir;
  struct Bad {
    std::string line, why;
  };
  const std::vector<Bad> bads = {
      {"neg", "missing the text column"},
      {"\tno label", "empty label"},
      {"pos\tbad \xFF byte", "invalid UTF-8"},
      {"neg\ttoo\tmany", "ragged row: 3 columns where the first row has 2"},
  };
  std::string everything = "pos\tgood one\n";
  for (const Bad& bad : bads) {
    // Throw: the first bad record stops the read, naming file and line.
    const std::string path = dir.write("one.tsv", "pos\tgood\n\n" + bad.line + "\nneg\tfine\n");
    INFO(bad.why);
    REQUIRE_THROWS_AS(read_tsv(path), DataError);
    CHECK_THAT(message_of<DataError>([&] { read_tsv(path); }), Catch::Contains(path + ":3: " + bad.why));
    everything += bad.line + "\n";
  }
  everything += "neg\tfine\n";
  const std::string path = dir.write("many.tsv", everything);
  ReadReport report;
  const auto kept = read_tsv(path, {.on_bad = OnBadRecord::Skip}, &report);
  REQUIRE(kept.size() == 2);
  CHECK((kept[0].line == 1 && kept[1].line == 6 && kept[1].text == "fine"));
  CHECK(report.records == 2);
  CHECK(report.skipped == 4);
  REQUIRE(report.problems.size() == 4);
  for (size_t i = 0; i < bads.size(); ++i)
    CHECK_THAT(report.problems[i], Catch::Contains(path + ":" + std::to_string(i + 2) + ": " + bads[i].why));

  // Label column 2 on two-column rows: missing.
  CHECK_THAT(message_of<DataError>([&] { read_tsv(path, {.label_column = 2}); }),
             Catch::Contains(":1: missing the label column 2"));
}

TEST_CASE("read_tsv / read_csv: no records is a DataError under any policy", "[data][text]") {
  TempDir dir;
  for (const OnBadRecord policy : {OnBadRecord::Throw, OnBadRecord::Skip}) {
    const std::string empty = dir.write("empty.tsv", "");
    CHECK_THAT(message_of<DataError>([&] { read_tsv(empty, {.on_bad = policy}); }),
               Catch::Contains(empty) && Catch::Contains("no records"));
    REQUIRE_THROWS_AS(read_tsv(dir.write("blank.tsv", "\n\r\n\n"), {.on_bad = policy}), DataError);
    REQUIRE_THROWS_AS(read_csv(dir.write("empty.csv", ""), {.on_bad = policy}), DataError);
    const std::string header_only = dir.write("h.csv", "label,text\r\n");
    CHECK_THAT(message_of<DataError>([&] { read_csv(header_only, {.on_bad = policy, .header = true}); }),
               Catch::Contains("after the header"));
  }
  const std::string all_bad = dir.write("bad.tsv", "neg\n\tx\n");
  CHECK_THAT(message_of<DataError>([&] { read_tsv(all_bad, {.on_bad = OnBadRecord::Skip}); }),
             Catch::Contains("all 2 were bad") && Catch::Contains("bad.tsv:1:"));
  const std::string missing = (dir.path / "none.tsv").string();
  CHECK_THAT(message_of<DataError>([&] { read_tsv(missing); }), Catch::Contains(missing));
}

TEST_CASE("read_csv: RFC 4180 quoting, embedded newlines, \"\" escapes, CRLF", "[data][text]") {
  TempDir dir;
  const std::string path = dir.write("r.csv",
                                     "label,text\r\n"
                                     "pos,\"Hello, world\"\r\n"
                                     "neg,\"He said \"\"no\"\"\"\n"
                                     "pos,\"line one\nline two\r\nline three\"\n"
                                     "\n"
                                     "neg,plain text with a \"quote\" inside\n"
                                     "\"pos\",\"\"\n"
                                     "neg,no newline at the end");
  ReadReport report;
  const auto got = read_csv(path, {.header = true}, &report);
  const std::vector<LabelledText> expected = {
      {"pos", "Hello, world", 2},
      {"neg", "He said \"no\"", 3},
      {"pos", "line one\nline two\r\nline three", 4},
      {"neg", "plain text with a \"quote\" inside", 8},
      {"pos", "", 9},
      {"neg", "no newline at the end", 10},
  };
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("record " << i);
    CHECK(got[i].label == expected[i].label);
    CHECK(got[i].text == expected[i].text);
    CHECK(got[i].line == expected[i].line);
  }
  CHECK(report.records == 6);
  CHECK(report.source == path);
}

TEST_CASE("read_csv: bad records under Throw and Skip", "[data][text]") {
  TempDir dir;
  struct Bad {
    std::string record, why;
  };
  const std::vector<Bad> bads = {
      {"neg,\"never closed\n", "unterminated quoted field (the quote opens on line 3)"},
      {"neg,\"closed\" then text\n", "text after the closing quote"},
      {"neg,\"a\",\"b\"\n", "ragged row: 3 columns where the first row has 2"},
      {",no label\n", "empty label"},
      {"pos,caf\xC3\n", "invalid UTF-8"},
      {"lonely\n", "missing the text column"},
  };
  for (const Bad& bad : bads) {
    const std::string path = dir.write("one.csv", "pos,\"first,\nrecord\"\n" + bad.record + "neg,after\n");
    INFO(bad.why);
    REQUIRE_THROWS_AS(read_csv(path), DataError);
    CHECK_THAT(message_of<DataError>([&] { read_csv(path); }), Catch::Contains(path + ":3: " + bad.why));
    ReadReport report;
    const auto kept = read_csv(path, {.on_bad = OnBadRecord::Skip}, &report);
    REQUIRE(kept.size() == 2);
    CHECK((kept[0].text == "first,\nrecord" && kept[1].text == "after" && kept[1].line == 4));
    CHECK(report.skipped == 1);
    CHECK(report.records == 2);
  }
  // An unterminated quote in a later field of a multi-line record spoils only the line it
  // opens on; reading resumes after it.
  const std::string path = dir.write("late.csv", "pos,a\nneg,\"x\ny\",\"z\nneg,b\n");
  ReadReport report;
  const auto kept = read_csv(path, {.on_bad = OnBadRecord::Skip}, &report);
  CHECK(report.skipped >= 1);
  CHECK_THAT(report.problems.front(), Catch::Contains("late.csv:2: unterminated"));
  CHECK(kept.back().text == "b");
}

TEST_CASE("read_labelled_text picks the reader by extension", "[data][text]") {
  TempDir dir;
  CHECK(read_labelled_text(dir.write("x.CSV", "pos,\"a\tb, c\"\n"))[0].text == "a\tb, c");
  CHECK(read_labelled_text(dir.write("x.txt", "pos\ta, b\n"))[0].text == "a, b");
  CHECK_THAT(message_of<ValueError>([&] { read_labelled_text(dir.path.string()); }), Catch::Contains("read_aclimdb"));
}

TEST_CASE("read_aclimdb: layout, order, <br />, bad files", "[data][text]") {
  TempDir dir;
  const std::string root = (dir.path / "aclImdb").string();
  dir.write("aclImdb/train/neg/1_3.txt", "Bad.<br /><br />Really bad.");
  dir.write("aclImdb/train/neg/0_2.txt", "Awful");
  dir.write("aclImdb/train/pos/2_8.txt", "Good");
  dir.write("aclImdb/train/pos/10_9.txt", "Great");
  dir.write("aclImdb/train/pos/README", "not a review");
  dir.write("aclImdb/train/unsup/0_0.txt", "ignored");
  ReadReport report;
  const auto got = read_aclimdb(root, "train", {}, &report);
  REQUIRE(got.size() == 4);
  CHECK((got[0].label == "neg" && got[0].text == "Awful" && got[0].line == 1));
  CHECK((got[1].label == "neg" && got[1].text == "Bad.  Really bad."));
  CHECK((got[2].label == "pos" && got[2].text == "Great"));  // "10_9" sorts before "2_8"
  CHECK((got[3].label == "pos" && got[3].text == "Good"));
  CHECK(report.records == 4);
  CHECK(report.source == (fs::path(root) / "train").string());

  CHECK_THAT(message_of<DataError>([&] { read_aclimdb(root, "test"); }),
             Catch::Contains((fs::path(root) / "test" / "neg").string()));
  REQUIRE_THROWS_AS(read_aclimdb(root, "dev"), ValueError);

  // A file that is not UTF-8 and one that cannot be read (a dangling link).
  const std::string bad = dir.write("aclImdb/train/pos/5_7.txt", "Caf\xE9 au lait");
  fs::create_symlink(dir.path / "gone.txt", dir.path / "aclImdb/train/neg/9_1.txt");
  CHECK_THAT(message_of<DataError>([&] { read_aclimdb(root, "train"); }),
             Catch::Contains("9_1.txt:1:") && Catch::Contains("cannot open"));
  fs::remove(dir.path / "aclImdb/train/neg/9_1.txt");
  CHECK_THAT(message_of<DataError>([&] { read_aclimdb(root, "train"); }),
             Catch::Contains(bad + ":1: invalid UTF-8 at byte 3"));
  fs::create_symlink(dir.path / "gone.txt", dir.path / "aclImdb/train/neg/9_1.txt");
  const auto kept = read_aclimdb(root, "train", {.on_bad = OnBadRecord::Skip}, &report);
  CHECK(kept.size() == 4);
  CHECK(report.skipped == 2);
  CHECK(report.records == 4);
}

TEST_CASE("the text readers and Vocab::load refuse a FIFO without blocking", "[data][text]") {
  TempDir dir;
  using loom::test::require_throws_without_blocking;
  const std::string tsv = loom::test::make_fifo(dir.file("x.tsv"));
  require_throws_without_blocking<DataError>([&] { read_tsv(tsv); }, tsv, {tsv, "is a FIFO, not a regular file"});
  require_throws_without_blocking<DataError>([&] { read_labelled_text(tsv); }, tsv, {tsv, "is a FIFO"});
  const std::string csv = loom::test::make_fifo(dir.file("x.csv"));
  require_throws_without_blocking<DataError>([&] { read_csv(csv); }, csv, {csv, "is a FIFO"});
  const std::string vocab = loom::test::make_fifo(dir.file("vocab.txt"));
  require_throws_without_blocking<DataError>([&] { Vocab::load(vocab); }, vocab, {vocab, "is a FIFO"});
  // In an aclImdb tree a FIFO is a bad file: an error, or skipped.
  dir.write("aclImdb/train/neg/0_2.txt", "Awful");
  dir.write("aclImdb/train/pos/2_8.txt", "Good");
  const std::string review = loom::test::make_fifo(dir.file("aclImdb/train/pos/3_9.txt"));
  const std::string root = (dir.path / "aclImdb").string();
  require_throws_without_blocking<DataError>([&] { read_aclimdb(root, "train"); }, review,
                                             {review + ":1: is a FIFO"});
  ReadReport report;
  size_t kept = 0;
  require_throws_without_blocking<DataError>(
      [&] {
        kept = read_aclimdb(root, "train", {.on_bad = OnBadRecord::Skip}, &report).size();
        throw DataError("read to the end");  // reached only without blocking
      },
      review, {"read to the end"});
  CHECK(kept == 2);
  CHECK(report.skipped == 1);
}

TEST_CASE("LabelSet: sorted ids, unknown labels", "[data][text]") {
  const LabelSet labels = LabelSet::from(records_of({{"pos", "a"}, {"neg", "b"}, {"pos", "c"}, {"mixed", "d"}}));
  REQUIRE(labels.size() == 3);
  CHECK(labels.names() == Tokens{"mixed", "neg", "pos"});
  CHECK(labels.id("mixed") == 0);
  CHECK(labels.id("pos") == 2);
  CHECK(labels.name(1) == "neg");
  CHECK(labels.contains("neg"));
  CHECK_FALSE(labels.contains("Neg"));
  CHECK_THAT(message_of<ValueError>([&] { labels.id("neutral"); }),
             Catch::Contains("'neutral'") && Catch::Contains("'mixed', 'neg', 'pos')"));
  REQUIRE_THROWS_AS(labels.name(3), IndexError);
  REQUIRE_THROWS_AS(labels.name(-1), IndexError);
}

TEST_CASE("LabelSet: the unknown-label message stays short with many long labels", "[data][text]") {
  std::vector<std::string> names;
  for (int i = 0; i < 10000; ++i) names.push_back(std::to_string(100000 + i) + std::string(300, 'x'));
  const LabelSet labels(names);
  const std::string msg = message_of<ValueError>([&] { labels.id("nope"); });
  CHECK(msg.size() < 1000);
  // A few, each cut short, and how many more.
  CHECK_THAT(msg, Catch::Contains("'nope'") && Catch::Contains("'100000xxx") && Catch::Contains("(306 bytes)") &&
                      Catch::Contains("and 9995 more"));
}

TEST_CASE("the bundled movie_snippets.tsv", "[data][text]") {
  const std::string path = LOOM_EXAMPLES_DATA_DIR "/movie_snippets.tsv";
  ReadReport report;
  const auto records = read_tsv(path, {}, &report);
  REQUIRE(records.size() == 10568);
  CHECK(report.records == 10568);
  CHECK(report.skipped == 0);

  // Label counts against a plain getline loop.
  std::ifstream in(path, std::ios::binary);
  std::map<std::string, size_t> expected;
  for (std::string line; std::getline(in, line);) ++expected[line.substr(0, line.find('\t'))];
  std::map<std::string, size_t> counts;
  for (const auto& r : records) ++counts[r.label];
  CHECK(counts == expected);
  const LabelSet labels = LabelSet::from(records);
  REQUIRE(labels.names() == Tokens{"neg", "pos"});
  for (const auto& [label, n] : counts) {
    const double share = double(n) / double(records.size());
    INFO(label << " " << share);
    CHECK((share > 0.45 && share < 0.55));
  }

  // The whole text pipeline on it: every example non-empty, unknown only below min_freq.
  const Vocab vocab = Vocab::build(tokenize_texts(records), 2);
  CHECK(vocab.size() > 5000);
  const TextClassificationDataset dataset(records, vocab, labels, 40);
  REQUIRE(dataset.size() == records.size());
  for (size_t i = 0; i < dataset.size(); i += 97) {
    const TextExample e = dataset.get(i);
    REQUIRE((e.tokens.size() >= 1 && e.tokens.size() <= 40));
    REQUIRE(dataset.lengths()[i] == e.tokens.size());
    REQUIRE(e.label == labels.id(records[i].label));
  }
}

// ---- dataset, collate, split ----------------------------------------------------------------

TEST_CASE("TextClassificationDataset: encoding, truncation, empty texts, unknown labels", "[data][text]") {
  const auto records = records_of({{"pos", "A fine, fine film"}, {"neg", "   "}, {"neg", "dull film"}});
  const Vocab vocab = Vocab::build({{"fine", "fine", "film", "film", "a"}});  // fine 2, film 2, a 1
  REQUIRE(vocab.tokens() == Tokens{"<pad>", "<unk>", "film", "fine", "a"});
  const LabelSet labels = LabelSet::from(records);
  const TextClassificationDataset full(records, vocab, labels);
  REQUIRE(full.size() == 3);
  CHECK(full.get(0).tokens == std::vector<int64_t>{4, 3, 1, 3, 2});  // "," is unknown
  CHECK(full.get(0).label == 1);
  CHECK(full.get(1).tokens == std::vector<int64_t>{Vocab::kUnk});  // never length 0
  CHECK(full.get(2).tokens == std::vector<int64_t>{1, 2});
  CHECK(full.get(2).label == 0);
  CHECK(full.lengths() == std::vector<size_t>{5, 1, 2});
  REQUIRE_THROWS_AS(full.get(3), IndexError);

  const TextClassificationDataset cut(records, vocab, labels, 3);
  CHECK(cut.get(0).tokens == std::vector<int64_t>{4, 3, 1});
  CHECK(cut.lengths() == std::vector<size_t>{3, 1, 2});

  const LabelSet only_pos(Tokens{"pos"});
  CHECK_THAT(message_of<ValueError>([&] { (void)TextClassificationDataset(records, vocab, only_pos); }),
             Catch::Contains("line 2") && Catch::Contains("'neg'"));
}

TEST_CASE("collate_text: shapes, padding, lengths and labels against a plain loop", "[data][text]") {
  std::mt19937 gen(17);
  for (const int64_t pad : {int64_t(0), int64_t(-7)}) {
    std::vector<TextExample> examples(9);
    size_t longest = 0;
    for (TextExample& e : examples) {
      e.tokens.resize(1 + gen() % 12);
      for (int64_t& id : e.tokens) id = int64_t(2 + gen() % 50);
      e.label = int64_t(gen() % 3);
      longest = std::max(longest, e.tokens.size());
    }
    const TextBatch batch = collate_text(examples, pad);
    REQUIRE(batch.tokens.dtype() == kInt64);
    REQUIRE(batch.lengths.dtype() == kInt64);
    REQUIRE(batch.labels.dtype() == kInt64);
    REQUIRE(batch.tokens.dim() == 2);
    REQUIRE(batch.tokens.size(0) == 9);
    REQUIRE(batch.tokens.size(1) == int64_t(longest));
    const auto tokens = batch.tokens.to_vector<int64_t>();
    const auto lengths = batch.lengths.to_vector<int64_t>();
    const auto labels = batch.labels.to_vector<int64_t>();
    REQUIRE(lengths.size() == 9);
    REQUIRE(labels.size() == 9);
    for (size_t b = 0; b < examples.size(); ++b) {
      CHECK(lengths[b] == int64_t(examples[b].tokens.size()));
      CHECK(labels[b] == examples[b].label);
      for (size_t t = 0; t < longest; ++t) {
        const int64_t want = t < examples[b].tokens.size() ? examples[b].tokens[t] : pad;
        if (tokens[b * longest + t] != want) FAIL("token (" << b << ", " << t << ")");
      }
    }
    const TextBatch moved = batch.to(kCPU);
    CHECK(moved.tokens.to_vector<int64_t>() == tokens);
    CHECK(moved.lengths.device() == kCPU);
  }
  REQUIRE_THROWS_AS(collate_text({}), ValueError);
  CHECK_THAT(message_of<ValueError>([] { collate_text({{{3, 4}, 0}, {{}, 1}}); }), Catch::Contains("example 1"));
}

TEST_CASE("split_train_test: deterministic, a partition, the asked-for sizes", "[data][text]") {
  std::vector<LabelledText> all;
  for (size_t i = 0; i < 103; ++i) all.push_back({i % 2 ? "pos" : "neg", "text " + std::to_string(i), i + 1});
  const auto texts = [](const std::vector<LabelledText>& v) {
    Tokens out;
    for (const auto& r : v) out.push_back(r.text);
    return out;
  };
  const auto [train, test] = split_train_test(all, 0.2, 7);
  CHECK(test.size() == 21);  // round(20.6)
  CHECK(train.size() == 82);
  Tokens together = texts(train);
  for (const auto& t : texts(test)) together.push_back(t);
  Tokens original = texts(all);
  CHECK(together != original);  // shuffled
  std::sort(together.begin(), together.end());
  std::sort(original.begin(), original.end());
  CHECK(together == original);  // every record exactly once

  const auto [train_again, test_again] = split_train_test(all, 0.2, 7);
  CHECK(texts(train_again) == texts(train));
  CHECK(texts(test_again) == texts(test));
  const auto [train_other, test_other] = split_train_test(all, 0.2, 8);
  CHECK(texts(test_other) != texts(test));

  CHECK(split_train_test(all, 0.0, 1).second.empty());
  CHECK(split_train_test(all, 1.0, 1).first.empty());
  CHECK(split_train_test({}, 0.5, 1).first.empty());
  REQUIRE_THROWS_AS(split_train_test(all, -0.1, 1), ValueError);
  REQUIRE_THROWS_AS(split_train_test(all, 1.5, 1), ValueError);
  REQUIRE_THROWS_AS(split_train_test(all, std::numeric_limits<double>::quiet_NaN(), 1), ValueError);
}
