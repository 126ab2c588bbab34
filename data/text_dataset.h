// Text classification data: a Dataset of (token ids, label id) examples, the collate
// function that pads them into a batch, and a deterministic train/test split.
//
//   auto [train_text, test_text] = split_train_test(read_tsv(path), 0.1, /*seed=*/0);
//   Vocab vocab = Vocab::build(tokenize_texts(train_text), 2);
//   LabelSet labels = LabelSet::from(train_text);
//   TextClassificationDataset train(train_text, vocab, labels, /*max_length=*/256);
//   TextBatch batch = collate_text({train.get(0), train.get(1)});
//   auto out = lstm(embedding(batch.tokens), nn::RNNState{}, batch.lengths);
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/text_readers.h"
#include "data/tokenizer.h"
#include "data/vocab.h"

namespace loom::data {

struct TextExample {
  std::vector<int64_t> tokens;
  int64_t label = 0;
};

// Tokenizes and encodes every record once, at construction. A text with no tokens (empty
// or all spaces) becomes the single token <unk>, so no example has length 0 (an RNN with
// lengths needs each >= 1). With max_length > 0 longer texts keep their first max_length
// tokens. A label not in labels is a ValueError naming it and the record's line.
class TextClassificationDataset : public Dataset<TextExample> {
 public:
  TextClassificationDataset(const std::vector<LabelledText>& records, const Vocab& vocab, const LabelSet& labels,
                            size_t max_length = 0, const TokenizerOptions& options = {});

  size_t size() const override { return examples_.size(); }
  TextExample get(size_t index) const override;  // IndexError out of range
  // Each example's token count, in index order (for BucketBatchSampler).
  const std::vector<size_t>& lengths() const { return lengths_; }

 private:
  std::vector<TextExample> examples_;
  std::vector<size_t> lengths_;
};

struct TextBatch {
  Tensor tokens;   // (B, T) int64, T the longest example, padded
  Tensor lengths;  // (B) int64, each >= 1
  Tensor labels;   // (B) int64
  // Moves tokens and labels; lengths stay on the CPU, where nn::LSTM (like PyTorch's
  // pack_padded_sequence) wants them.
  TextBatch to(Device device, bool non_blocking = false) const;
  // Page-locked copies of all three (DataLoaderOptions::pin_memory): a model that needs the
  // lengths on the GPU too (a padding mask) moves them there with to(device, non_blocking).
  TextBatch pin_memory() const;
};

// Pads a batch of examples with pad to the longest one (or to min_length tokens if that is
// longer), keeping their order. ValueError for no examples or an example with no tokens.
TextBatch collate_text(std::vector<TextExample> examples, int64_t pad = Vocab::kPad, size_t min_length = 0);

// Every record's text tokenized, in order: the corpus Vocab::build takes.
std::vector<std::vector<std::string>> tokenize_texts(const std::vector<LabelledText>& records,
                                                     const TokenizerOptions& options = {});

// Shuffles all with a Fisher-Yates shuffle driven by std::mt19937_64(seed) and returns
// (train, test): test holds round(test_fraction * n) records, train the rest. mt19937_64
// is specified bit for bit and the shuffle does not use std::shuffle or a std
// distribution (both unspecified), so a seed gives the same split on every platform.
// ValueError unless 0 <= test_fraction <= 1.
std::pair<std::vector<LabelledText>, std::vector<LabelledText>> split_train_test(std::vector<LabelledText> all,
                                                                                 double test_fraction, uint64_t seed);

}  // namespace loom::data
