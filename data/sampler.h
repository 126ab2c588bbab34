// Samplers: which examples go into which batch, epoch by epoch (torch.utils.data's
// SequentialSampler, RandomSampler and BatchSampler, plus a length-bucketing batch
// sampler for variable-length text).
//
// Note [one seed, every epoch]
// A shuffling sampler is a pure function of (seed, epoch): epoch e's order is a
// Fisher-Yates shuffle driven by mt19937_64 seeded with mix(seed, e). So the order does
// not depend on the number of DataLoader workers, on how many epochs ran before in this
// process, or on the standard library (mt19937_64 is specified bit for bit; std::shuffle
// and the std distributions are not), and a resumed run sees the same batches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace loom::data {

using Batches = std::vector<std::vector<size_t>>;  // per batch, the dataset indices

// The generator for epoch `epoch` of a sampler seeded with `seed` (SplitMix64 mixing, so
// nearby seeds and epochs give unrelated streams).
std::mt19937_64 epoch_generator(uint64_t seed, uint64_t epoch);

// Uniform integer in [0, n) without the unspecified std::uniform_int_distribution.
uint64_t uniform_below(std::mt19937_64& gen, uint64_t n);

// Fisher-Yates shuffle with uniform_below: the same permutation on every platform.
template <typename T>
void shuffle_in_place(std::vector<T>& items, std::mt19937_64& gen) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[uniform_below(gen, i)]);
}

// An order over the indices 0..n-1 for each epoch.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<size_t> indices(uint64_t epoch) const = 0;
  virtual size_t size() const = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(size_t n) : n_(n) {}
  std::vector<size_t> indices(uint64_t epoch) const override;
  size_t size() const override { return n_; }

 private:
  size_t n_;
};

// A fresh permutation each epoch (without replacement), see Note [one seed, every epoch].
class RandomSampler : public Sampler {
 public:
  RandomSampler(size_t n, uint64_t seed) : n_(n), seed_(seed) {}
  std::vector<size_t> indices(uint64_t epoch) const override;
  size_t size() const override { return n_; }

 private:
  size_t n_;
  uint64_t seed_;
};

// Groups of indices, one group per batch, for each epoch.
class BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  virtual Batches batches(uint64_t epoch) const = 0;
  virtual size_t num_batches() const = 0;
};

// Cuts a sampler's order into batches of batch_size; the last one is short unless
// drop_last (10 samples at batch 3: 3, 3, 3, 1 or, with drop_last, 3, 3, 3).
class ChunkBatchSampler : public BatchSampler {
 public:
  ChunkBatchSampler(std::shared_ptr<const Sampler> sampler, size_t batch_size, bool drop_last);
  Batches batches(uint64_t epoch) const override;
  size_t num_batches() const override;

 private:
  std::shared_ptr<const Sampler> sampler_;
  size_t batch_size_;
  bool drop_last_;
};

// Length bucketing: batches of similar lengths, so little of each batch is padding.
// Each epoch: shuffle all indices, cut them into pools of batch_size * pool_batches,
// sort each pool by length, cut the pools into batches, and shuffle the batch order.
// Every index lands in exactly one batch; only the last batch of a pool can be short
// (dropped with drop_last). With shuffle = false the pools are taken in index order and
// the batch order is kept, which makes the batching deterministic for evaluation.
class BucketBatchSampler : public BatchSampler {
 public:
  BucketBatchSampler(std::vector<size_t> lengths, size_t batch_size, uint64_t seed,
                     bool shuffle = true, bool drop_last = false, size_t pool_batches = 50);
  Batches batches(uint64_t epoch) const override;
  size_t num_batches() const override;

 private:
  std::vector<size_t> lengths_;
  size_t batch_size_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  size_t pool_batches_;
};

}  // namespace loom::data
