// DistributedSampler: each of num_replicas data-parallel ranks reads its own share of the
// dataset every epoch (torch.utils.data.distributed.DistributedSampler).
//
// Every rank computes the same order of the whole dataset for the epoch (0..n-1, or with
// shuffle a permutation that depends only on seed and epoch: Note [one seed, every epoch]
// in data/sampler.h), makes it a multiple of num_replicas long, and takes every
// num_replicas-th index starting at its rank (shard() below, PyTorch's rule exactly):
//   - drop_last false: the order is padded with its own first indices (repeated if
//     needed), so some samples are read twice in an epoch;
//     10 samples, 4 ranks: 3 each, rank 1 gets 1, 5, 9 and rank 3 gets 3, 7, 1;
//   - drop_last true: the order is cut to floor(n / num_replicas) * num_replicas;
//     10 samples, 4 ranks: 2 each, rank 3 gets 3, 7.
// The epoch is the one the DataLoader passes (DataLoader::set_epoch to resume), which is
// what PyTorch's sampler.set_epoch(e) is for. The shuffled order is Loom's generator's,
// not torch.randperm's; the padding and striding are PyTorch's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/sampler.h"

namespace loom::data {

class DistributedSampler : public Sampler {
 public:
  DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // This rank's indices for the epoch: size() of them.
  std::vector<size_t> indices(uint64_t epoch) const override;
  size_t size() const override { return num_samples_; }  // per rank, as len(sampler)
  size_t total_size() const { return num_samples_ * num_replicas_; }  // over all ranks

  // rank's share of order (one epoch's order of the whole dataset), padded or cut as above.
  static std::vector<size_t> shard(const std::vector<size_t>& order, size_t num_replicas, size_t rank,
                                   bool drop_last);

 private:
  size_t dataset_size_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  size_t num_samples_;
};

}  // namespace loom::data
