// TextClassificationDataset, collate_text and split_train_test; see data/text_dataset.h.
#include "data/text_dataset.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/factories.h"
#include "data/sampler.h"
#include "data/text_lines.h"

namespace loom::data {

TextClassificationDataset::TextClassificationDataset(const std::vector<LabelledText>& records, const Vocab& vocab,
                                                     const LabelSet& labels, size_t max_length,
                                                     const TokenizerOptions& options) {
  examples_.reserve(records.size());
  lengths_.reserve(records.size());
  for (const LabelledText& record : records) {
    LOOM_CHECK(labels.contains(record.label), ValueError, "TextClassificationDataset: the record on line ",
               record.line, " has the label ", quote_excerpt(record.label), ", which is not in the label set");
    const auto bad_byte = first_invalid_utf8_byte(record.text);
    LOOM_CHECK(!bad_byte, ValueError, "TextClassificationDataset: the text on line ", record.line,
               " is not valid UTF-8 (at byte ", bad_byte.value_or(0), ")");
    std::vector<int64_t> tokens = vocab.encode(record.text, options);
    if (tokens.empty()) tokens.push_back(Vocab::kUnk);  // length >= 1, see the header
    if (max_length > 0 && tokens.size() > max_length) tokens.resize(max_length);
    lengths_.push_back(tokens.size());
    examples_.push_back({std::move(tokens), labels.id(record.label)});
  }
}

TextExample TextClassificationDataset::get(size_t index) const {
  LOOM_CHECK(index < examples_.size(), IndexError, "TextClassificationDataset::get: index ", index,
             " out of range for a dataset of size ", examples_.size());
  return examples_[index];
}

TextBatch TextBatch::to(Device device, bool non_blocking) const {
  return {tokens.to(device, non_blocking), lengths, labels.to(device, non_blocking)};
}

TextBatch TextBatch::pin_memory() const { return {tokens.pin_memory(), lengths.pin_memory(), labels.pin_memory()}; }

TextBatch collate_text(std::vector<TextExample> examples, int64_t pad, size_t min_length) {
  LOOM_CHECK(!examples.empty(), ValueError, "collate_text: no examples to batch");
  size_t longest = min_length;
  for (size_t b = 0; b < examples.size(); ++b) {
    LOOM_CHECK(!examples[b].tokens.empty(), ValueError, "collate_text: example ", b,
               " has no tokens (an RNN with lengths needs each length >= 1)");
    longest = std::max(longest, examples[b].tokens.size());
  }
  const auto batch = static_cast<int64_t>(examples.size());
  std::vector<int64_t> tokens(examples.size() * longest, pad), lengths, labels;
  for (size_t b = 0; b < examples.size(); ++b) {
    const std::vector<int64_t>& ids = examples[b].tokens;
    std::copy(ids.begin(), ids.end(), tokens.begin() + static_cast<ptrdiff_t>(b * longest));
    lengths.push_back(static_cast<int64_t>(ids.size()));
    labels.push_back(examples[b].label);
  }
  return {from_vector(tokens, {batch, static_cast<int64_t>(longest)}), from_vector(lengths), from_vector(labels)};
}

std::vector<std::vector<std::string>> tokenize_texts(const std::vector<LabelledText>& records,
                                                     const TokenizerOptions& options) {
  std::vector<std::vector<std::string>> corpus;
  corpus.reserve(records.size());
  for (const LabelledText& record : records) corpus.push_back(tokenize(record.text, options));
  return corpus;
}

std::pair<std::vector<LabelledText>, std::vector<LabelledText>> split_train_test(std::vector<LabelledText> all,
                                                                                 double test_fraction, uint64_t seed) {
  LOOM_CHECK(test_fraction >= 0.0 && test_fraction <= 1.0, ValueError,
             "split_train_test: test_fraction must be in [0, 1], got ", test_fraction);
  std::mt19937_64 generator(seed);
  shuffle_in_place(all, generator);  // Fisher-Yates, the same on every platform
  const auto test_size = static_cast<size_t>(std::llround(test_fraction * static_cast<double>(all.size())));
  const auto cut = all.begin() + static_cast<ptrdiff_t>(all.size() - test_size);
  std::vector<LabelledText> test(std::make_move_iterator(cut), std::make_move_iterator(all.end()));
  all.erase(cut, all.end());
  return {std::move(all), std::move(test)};
}

}  // namespace loom::data
