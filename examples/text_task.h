// The data side shared by the text-classification examples: read a labelled file (TSV,
// CSV) or an aclImdb directory, hold out a test split, build the vocabulary from the
// training split only, and evaluate a model on a loader. What a PyTorch script would
// keep in its `data.py`.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "loom.h"
#include "smoke_test.h"

namespace examples {

using namespace loom;

struct TextTask {
  data::Vocab vocab;
  data::LabelSet labels;
  std::shared_ptr<data::TextClassificationDataset> train, test;
};

struct TextTaskOptions {
  std::string path;            // a .tsv/.csv file, or an aclImdb directory
  double test_fraction = 0.2;  // for a single file: held out at random (seeded)
  uint64_t seed = 0;
  size_t min_freq = 2;
  size_t max_length = 64;      // tokens kept per text
  size_t train_limit = 0;      // use only the first N training texts (0: all)
  std::string vocab_path;      // load this vocabulary instead of building one
};

// The vocabulary written beside a checkpoint (--checkpoint's, --keep-best's): CHECKPOINT.vocab.txt.
inline std::string vocab_beside(const std::string& checkpoint) { return checkpoint + ".vocab.txt"; }

// That vocabulary's path, which must exist: a checkpoint alone cannot map words to its
// embedding's rows (a vocabulary built again from other data would silently not match).
inline std::string existing_vocab_beside(const std::string& checkpoint) {
  const std::string vocab = vocab_beside(checkpoint);
  LOOM_CHECK(std::filesystem::is_regular_file(vocab), SerializationError, checkpoint, ": no vocabulary beside it (",
             vocab, "); --checkpoint and --keep-best write one next to their file: copy it with the checkpoint");
  return vocab;
}

inline TextTask load_text_task(const TextTaskOptions& o) {
  std::vector<data::LabelledText> train, test;
  data::ReadReport report;
  if (std::filesystem::is_directory(o.path)) {
    train = data::read_aclimdb(o.path, "train", {}, &report);
    test = data::read_aclimdb(o.path, "test");
  } else {
    std::tie(train, test) =
        data::split_train_test(data::read_labelled_text(o.path, {}, &report), o.test_fraction, o.seed);
  }
  if (o.train_limit > 0 && train.size() > o.train_limit) train.resize(o.train_limit);

  TextTask task;
  task.labels = data::LabelSet::from(train);
  task.vocab = o.vocab_path.empty() ? data::Vocab::build(data::tokenize_texts(train), o.min_freq)
                                    : data::Vocab::load(o.vocab_path);
  task.train = std::make_shared<data::TextClassificationDataset>(train, task.vocab, task.labels, o.max_length);
  task.test = std::make_shared<data::TextClassificationDataset>(test, task.vocab, task.labels, o.max_length);
  std::printf("data: %s: %zu train / %zu test texts, %zu labels, vocabulary %zu (min_freq %zu)\n",
              o.path.c_str(), train.size(), test.size(), task.labels.size(), task.vocab.size(),
              o.min_freq);
  return task;
}

// Batches of similar lengths (little padding); shuffled per epoch for training.
// pin_memory: page-locked batches, for non-blocking copies to a GPU. shard (rank, world
// size) with world > 1: this rank's share, as PyTorch's DistributedSampler gives it
// (batches of that share in order, so without the length bucketing). pad_to > 0: every
// batch padded to at least pad_to tokens (a model run at a fixed sequence length).
inline auto text_loader(const std::shared_ptr<data::TextClassificationDataset>& ds, size_t batch_size,
                        bool shuffle, uint64_t seed, size_t workers, bool pin_memory = false,
                        std::pair<size_t, size_t> shard = {0, 1}, size_t pad_to = 0) {
  std::shared_ptr<const data::BatchSampler> sampler;
  if (shard.second > 1) {
    auto share = std::make_shared<data::DistributedSampler>(ds->size(), shard.second, shard.first, shuffle, seed);
    sampler = std::make_shared<data::ChunkBatchSampler>(share, batch_size, /*drop_last=*/false);
  } else {
    sampler = std::make_shared<data::BucketBatchSampler>(ds->lengths(), batch_size, seed, shuffle);
  }
  auto collate = [pad_to](std::vector<data::TextExample> examples) {
    return data::collate_text(std::move(examples), data::Vocab::kPad, pad_to);
  };
  return data::make_data_loader(ds, collate, sampler,
                                data::DataLoaderOptions().num_workers(workers).pin_memory(pin_memory));
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

// Mean cross-entropy and accuracy of model(tokens, lengths) over a loader, without grad.
template <typename Loader, typename Model>
Evaluation evaluate(Loader& loader, Model& model, Device device) {
  NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0, correct = 0, count = 0;
  for (data::TextBatch& cpu_batch : loader) {
    data::TextBatch batch = cpu_batch.to(device, /*non_blocking=*/true);
    Tensor logits = model.forward(batch.tokens, batch.lengths);
    const double n = static_cast<double>(batch.labels.size(0));
    loss_sum += nn::functional::cross_entropy(logits, batch.labels).item<double>() * n;
    correct += logits.argmax(1).eq(batch.labels).sum().item<double>();
    count += n;
  }
  model.train();
  return {loss_sum / count, correct / count};
}


}  // namespace examples
