// libFuzzer target for Vocab::load (data/vocab.cpp): any file must either load or throw a
// loom::Error — never crash, overflow, hang, or throw anything else. A vocab that loads
// starts with the two specials, maps every token back to its own id, survives save ->
// load unchanged, and encodes any text to ids inside the vocab. Built and run by
// scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/vocab.h"
#include "fuzz_util.h"

using loom::data::Vocab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = loom::fuzz::input_file(data, size, "vocab.txt");
  Vocab vocab;
  try {
    vocab = Vocab::load(path);
  } catch (const loom::Error&) {
    return 0;
  }
  const auto n = static_cast<int64_t>(vocab.size());
  FUZZ_CHECK(n >= 2 && size_t(n) <= size / 2 + 1);  // a token and its line end per line
  FUZZ_CHECK(vocab.token(Vocab::kPad) == Vocab::kPadToken && vocab.token(Vocab::kUnk) == Vocab::kUnkToken);
  for (int64_t id = 0; id < n; ++id) FUZZ_CHECK(vocab.index(vocab.token(id)) == id);

  const std::string copy = loom::fuzz::scratch_file("saved-vocab.txt");
  vocab.save(copy);  // a vocab that loaded is storable, so this must not throw
  FUZZ_CHECK(Vocab::load(copy).tokens() == vocab.tokens());

  // The file's own bytes as text: every id in range, and decodable.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<int64_t> ids = vocab.encode(text);
    for (int64_t id : ids) FUZZ_CHECK(id >= 0 && id < n);
    vocab.decode(ids);
  } catch (const loom::Error&) {  // the tokenizer refuses some text (invalid UTF-8)
  }
  return 0;
}
