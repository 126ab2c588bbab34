#include "data/sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace loom::data {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::vector<size_t> iota_indices(size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  return order;
}

void check_batch_size(const char* who, size_t batch_size) {
  LOOM_CHECK(batch_size > 0, ValueError, who, ": batch_size must be positive, got 0");
}
}  // namespace

std::mt19937_64 epoch_generator(uint64_t seed, uint64_t epoch) {
  return std::mt19937_64(splitmix64(splitmix64(seed) ^ epoch));
}

uint64_t uniform_below(std::mt19937_64& gen, uint64_t n) {
  // Rejection sampling: take the top of the 64-bit range that is a multiple of n.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = gen(); while (x >= limit);
  return x % n;
}

std::vector<size_t> SequentialSampler::indices(uint64_t) const { return iota_indices(n_); }

std::vector<size_t> RandomSampler::indices(uint64_t epoch) const {
  std::vector<size_t> order = iota_indices(n_);
  std::mt19937_64 gen = epoch_generator(seed_, epoch);
  shuffle_in_place(order, gen);
  return order;
}

ChunkBatchSampler::ChunkBatchSampler(std::shared_ptr<const Sampler> sampler, size_t batch_size,
                                     bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  LOOM_CHECK(sampler_ != nullptr, ValueError, "ChunkBatchSampler: sampler is null");
  check_batch_size("ChunkBatchSampler", batch_size_);
}

size_t ChunkBatchSampler::num_batches() const {
  const size_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

Batches ChunkBatchSampler::batches(uint64_t epoch) const {
  const std::vector<size_t> order = sampler_->indices(epoch);
  Batches out;
  for (size_t start = 0; start < order.size(); start += batch_size_) {
    const size_t end = std::min(order.size(), start + batch_size_);
    if (drop_last_ && end - start < batch_size_) break;
    out.emplace_back(order.begin() + static_cast<ptrdiff_t>(start),
                     order.begin() + static_cast<ptrdiff_t>(end));
  }
  return out;
}

BucketBatchSampler::BucketBatchSampler(std::vector<size_t> lengths, size_t batch_size,
                                       uint64_t seed, bool shuffle, bool drop_last,
                                       size_t pool_batches)
    : lengths_(std::move(lengths)), batch_size_(batch_size), seed_(seed), shuffle_(shuffle),
      drop_last_(drop_last), pool_batches_(pool_batches) {
  check_batch_size("BucketBatchSampler", batch_size_);
  LOOM_CHECK(pool_batches_ > 0, ValueError, "BucketBatchSampler: pool_batches must be positive");
}

Batches BucketBatchSampler::batches(uint64_t epoch) const {
  std::mt19937_64 gen = epoch_generator(seed_, epoch);
  std::vector<size_t> order = iota_indices(lengths_.size());
  if (shuffle_) shuffle_in_place(order, gen);

  Batches out;
  const size_t pool = batch_size_ * pool_batches_;
  for (size_t start = 0; start < order.size(); start += pool) {
    auto first = order.begin() + static_cast<ptrdiff_t>(start);
    auto last = order.begin() + static_cast<ptrdiff_t>(std::min(order.size(), start + pool));
    // Stable, so equal lengths keep the (shuffled) pool order.
    std::stable_sort(first, last, [&](size_t a, size_t b) { return lengths_[a] < lengths_[b]; });
    for (auto it = first; it != last;) {
      const auto take = std::min<ptrdiff_t>(static_cast<ptrdiff_t>(batch_size_), last - it);
      if (drop_last_ && static_cast<size_t>(take) < batch_size_) break;
      out.emplace_back(it, it + take);
      it += take;
    }
  }
  if (shuffle_) shuffle_in_place(out, gen);
  return out;
}

size_t BucketBatchSampler::num_batches() const {
  const size_t n = lengths_.size(), pool = batch_size_ * pool_batches_;
  const size_t full_pools = n / pool, rest = n % pool;
  const size_t per_pool = pool_batches_;
  const size_t rest_batches = drop_last_ ? rest / batch_size_ : (rest + batch_size_ - 1) / batch_size_;
  return full_pools * per_pool + rest_batches;
}

}  // namespace loom::data
