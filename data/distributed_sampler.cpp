#include "data/distributed_sampler.h"

#include <numeric>

#include "core/error.h"

namespace loom::data {

namespace {

// Per rank: ceil(n / r), or with drop_last floor(n / r) (PyTorch's
// ceil((n - r) / r) when r does not divide n).
size_t samples_per_rank(size_t n, size_t replicas, bool drop_last) {
  return drop_last ? n / replicas : (n + replicas - 1) / replicas;
}

void check_rank(const char* op, size_t num_replicas, size_t rank) {
  LOOM_CHECK(num_replicas >= 1, ValueError, op, ": num_replicas must be at least 1, got 0");
  LOOM_CHECK(rank < num_replicas, ValueError, op, ": rank ", rank, " is not in [0, ", num_replicas, ")");
}

}  // namespace

DistributedSampler::DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last) {
  check_rank("DistributedSampler", num_replicas, rank);
  num_samples_ = samples_per_rank(dataset_size, num_replicas, drop_last);
}

std::vector<size_t> DistributedSampler::indices(uint64_t epoch) const {
  std::vector<size_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), size_t(0));
  if (shuffle_) {
    std::mt19937_64 gen = epoch_generator(seed_, epoch);
    shuffle_in_place(order, gen);
  }
  return shard(order, num_replicas_, rank_, drop_last_);
}

std::vector<size_t> DistributedSampler::shard(const std::vector<size_t>& order, size_t num_replicas, size_t rank,
                                              bool drop_last) {
  check_rank("DistributedSampler::shard", num_replicas, rank);
  const size_t n = order.size();
  const size_t total = samples_per_rank(n, num_replicas, drop_last) * num_replicas;
  std::vector<size_t> mine;
  if (n == 0) return mine;
  mine.reserve(total / num_replicas);
  // Position k of the padded (or cut) order is order[k % n]: padding repeats the order
  // from its start, as many times as needed.
  for (size_t k = rank; k < total; k += num_replicas) mine.push_back(order[k % n]);
  return mine;
}

}  // namespace loom::data
