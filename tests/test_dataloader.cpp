// DataLoader and samplers: batching, shuffling that does not depend on the number of
// workers, prefetching threads, worker errors, timeouts, and length bucketing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include "cuda_test_util.h"
#include "data/dataloader.h"
#include "test_util.h"

using namespace loom;
using namespace loom::data;

namespace {

using IntBatch = std::vector<int>;
using IntLoader = DataLoader<int, IntBatch>;
IntBatch collate_ints(std::vector<int> examples) { return examples; }

std::shared_ptr<LambdaDataset<int>> identity_dataset(size_t n) {
  return std::make_shared<LambdaDataset<int>>(n, [](size_t i) { return static_cast<int>(i); });
}

// Every batch of every epoch, flattened per epoch.
template <typename Loader>
std::vector<std::vector<int>> run_epochs(Loader& loader, int epochs) {
  std::vector<std::vector<int>> out;
  for (int e = 0; e < epochs; ++e) {
    std::vector<int> seen;
    for (IntBatch& batch : loader) seen.insert(seen.end(), batch.begin(), batch.end());
    out.push_back(seen);
  }
  return out;
}

std::vector<size_t> batch_sizes(IntLoader& loader) {
  std::vector<size_t> sizes;
  for (IntBatch& batch : loader) sizes.push_back(batch.size());
  return sizes;
}

bool is_permutation_of_range(std::vector<int> v, size_t n) {
  std::sort(v.begin(), v.end());
  std::vector<int> expected(n);
  std::iota(expected.begin(), expected.end(), 0);
  return v == expected;
}

}  // namespace

TEST_CASE("DataLoader: batch sizes, a short last batch, drop_last", "[data][loader]") {
  auto ds = identity_dataset(10);
  for (size_t workers : {0, 2}) {
    IntLoader loader(ds, collate_ints, DataLoaderOptions(3).num_workers(workers));
    REQUIRE(loader.size() == 4);
    REQUIRE(batch_sizes(loader) == std::vector<size_t>{3, 3, 3, 1});
    IntLoader dropping(ds, collate_ints,
                                       DataLoaderOptions(3).drop_last(true).num_workers(workers));
    REQUIRE(dropping.size() == 3);
    REQUIRE(batch_sizes(dropping) == std::vector<size_t>{3, 3, 3});
  }
  // Unshuffled: the dataset's order.
  IntLoader loader(ds, collate_ints, DataLoaderOptions(4));
  std::vector<int> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  REQUIRE(run_epochs(loader, 1)[0] == expected);
}

TEST_CASE("DataLoader: shuffle is a new permutation each epoch, the same for any number of workers",
          "[data][loader]") {
  auto ds = identity_dataset(53);
  auto make = [&](size_t workers) {
    return IntLoader(ds, collate_ints,
                                     DataLoaderOptions(5).shuffle(true).seed(7).num_workers(workers));
  };
  auto serial = make(0);
  const auto reference = run_epochs(serial, 3);
  for (const auto& epoch : reference) REQUIRE(is_permutation_of_range(epoch, 53));
  REQUIRE(reference[0] != reference[1]);
  REQUIRE(reference[1] != reference[2]);
  std::vector<int> identity(53);
  std::iota(identity.begin(), identity.end(), 0);
  REQUIRE(reference[0] != identity);

  for (size_t workers : {1, 2, 3}) {
    auto loader = make(workers);
    REQUIRE(run_epochs(loader, 3) == reference);
  }
  // Resuming at epoch 2 gives epoch 2's order; another seed gives another order.
  auto resumed = make(2);
  resumed.set_epoch(2);
  REQUIRE(run_epochs(resumed, 1)[0] == reference[2]);
  IntLoader other(ds, collate_ints, DataLoaderOptions(5).shuffle(true).seed(8));
  REQUIRE(run_epochs(other, 1)[0] != reference[0]);
}

TEST_CASE("DataLoader: set_start_batch resumes an epoch after the batches it had consumed, loading none of them",
          "[data][loader]") {
  std::atomic<int> loads{0};
  auto counted = std::make_shared<LambdaDataset<int>>(53, [&](size_t i) {
    ++loads;
    return static_cast<int>(i);
  });
  IntLoader whole(counted, collate_ints, DataLoaderOptions(5).shuffle(true).seed(7));
  const auto reference = run_epochs(whole, 3);  // 11 batches an epoch, the last of 3
  for (size_t workers : {0, 2}) {
    IntLoader resumed(counted, collate_ints, DataLoaderOptions(5).shuffle(true).seed(7).num_workers(workers));
    resumed.set_epoch(1);
    resumed.set_start_batch(4);
    loads = 0;
    const auto rest = run_epochs(resumed, 2);
    REQUIRE(rest[0] == std::vector<int>(reference[1].begin() + 20, reference[1].end()));
    REQUIRE(rest[1] == reference[2]);  // the epoch after starts at its first batch
    REQUIRE(loads.load() == 33 + 53);
    resumed.set_start_batch(11);  // the whole epoch was consumed: nothing left of it
    REQUIRE(run_epochs(resumed, 1)[0].empty());
  }
  IntLoader loader(counted, collate_ints, DataLoaderOptions(5));
  REQUIRE_THROWS_AS(loader.set_start_batch(12), ValueError);
  REQUIRE_THROWS_WITH(loader.set_start_batch(12), Catch::Contains("batch 12 of an epoch of 11 batches"));
}

TEST_CASE("DataLoader: workers load concurrently and batches still come in order", "[data][loader]") {
  std::atomic<int> active{0}, most_active{0};
  auto slow = std::make_shared<LambdaDataset<int>>(24, [&](size_t i) {
    const int now = ++active;
    int seen = most_active.load();
    while (now > seen && !most_active.compare_exchange_weak(seen, now)) {}
    // Later indices finish sooner, so out-of-order completion is the norm.
    std::this_thread::sleep_for(std::chrono::milliseconds(2 + (24 - i) % 5));
    --active;
    return static_cast<int>(i);
  });
  IntLoader loader(slow, collate_ints, DataLoaderOptions(2).num_workers(3));
  std::vector<int> expected(24);
  std::iota(expected.begin(), expected.end(), 0);
  REQUIRE(run_epochs(loader, 1)[0] == expected);
  REQUIRE(most_active.load() >= 2);
}

TEST_CASE("DataLoader: tensor batches through a custom collate", "[data][loader]") {
  auto ds = std::make_shared<LambdaDataset<Tensor>>(7, [](size_t i) {
    return full({3}, static_cast<double>(i) + 0.5);
  });
  auto stack_rows = [](std::vector<Tensor> rows) { return stack(rows, 0); };
  auto loader = make_data_loader(ds, stack_rows, DataLoaderOptions(3).num_workers(2));
  std::vector<Tensor> batches;
  for (Tensor& b : loader) batches.push_back(b);
  REQUIRE(batches.size() == 3);
  REQUIRE(batches[0].sizes() == Shape{3, 3});
  REQUIRE(batches[2].sizes() == Shape{1, 3});
  for (size_t b = 0; b < 3; ++b)
    for (int64_t r = 0; r < batches[b].size(0); ++r)
      for (float v : batches[b][r].to_vector<float>()) REQUIRE(v == float(b * 3 + r) + 0.5f);
}

TEST_CASE("DataLoader: a failing example surfaces as the worker's own error", "[data][loader]") {
  auto broken = std::make_shared<LambdaDataset<int>>(12, [](size_t i) {
    LOOM_CHECK(i != 7, DataError, "reviews.tsv:8: missing label");
    return static_cast<int>(i);
  });
  // Without workers the original exception comes straight through.
  IntLoader serial(broken, collate_ints, DataLoaderOptions(3));
  REQUIRE_THROWS_AS(run_epochs(serial, 1), DataError);

  IntLoader loader(broken, collate_ints, DataLoaderOptions(3).num_workers(2));
  size_t batches_before = 0;
  try {
    for (IntBatch& batch : loader) {
      (void)batch;
      ++batches_before;
    }
    FAIL("expected a WorkerError");
  } catch (const WorkerError& e) {
    const std::string what = e.what();
    REQUIRE(what.find("DataLoader worker") != std::string::npos);
    REQUIRE(what.find("batch 2") != std::string::npos);
    REQUIRE(what.find("6, 7, 8") != std::string::npos);
    REQUIRE(what.find("reviews.tsv:8: missing label") != std::string::npos);
    REQUIRE_THROWS_AS(e.rethrow_original(), DataError);
  }
  REQUIRE(batches_before == 2);
  // The loader is usable again for the next epoch's attempt.
  REQUIRE_THROWS_AS(run_epochs(loader, 1), WorkerError);
}

TEST_CASE("DataLoader: timeout names the batch, and an abandoned pass does not hang", "[data][loader]") {
  auto stuck = std::make_shared<LambdaDataset<int>>(6, [](size_t i) {
    if (i == 4) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return static_cast<int>(i);
  });
  IntLoader loader(stuck, collate_ints,
                                   DataLoaderOptions(2).num_workers(1).timeout(0.05));
  size_t got = 0;
  try {
    for (IntBatch& batch : loader) {
      (void)batch;
      ++got;
    }
    FAIL("expected a TimeoutError");
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    REQUIRE(what.find("batch 2") != std::string::npos);
    REQUIRE(what.find("0.05 s") != std::string::npos);
  }
  REQUIRE(got == 2);
  // Breaking out of a pass early and starting another is fine.
  auto ds = identity_dataset(40);
  IntLoader loader2(ds, collate_ints, DataLoaderOptions(4).num_workers(2));
  for (IntBatch& batch : loader2) {
    REQUIRE(batch[0] == 0);
    break;
  }
  REQUIRE(run_epochs(loader2, 1)[0].size() == 40);
}

TEST_CASE("DataLoader: bad options are rejected", "[data][loader]") {
  auto ds = identity_dataset(5);
  REQUIRE_THROWS_AS(IntLoader(ds, collate_ints, DataLoaderOptions(0)), ValueError);
  REQUIRE_THROWS_AS(IntLoader(ds, collate_ints, DataLoaderOptions(2).timeout(-1)),
                    ValueError);
  REQUIRE_THROWS_AS(IntLoader(ds, collate_ints, DataLoaderOptions(2).prefetch_factor(0)),
                    ValueError);
  auto sampler = std::make_shared<BucketBatchSampler>(std::vector<size_t>(5, 1), 2, 0);
  REQUIRE_THROWS_WITH(IntLoader(ds, collate_ints, sampler, DataLoaderOptions().shuffle(true)),
                      Catch::Contains("mutually exclusive"));
  // A batch sampler that points past the dataset is caught, not read out of bounds.
  auto too_long = std::make_shared<BucketBatchSampler>(std::vector<size_t>(9, 1), 3, 0);
  IntLoader bad(ds, collate_ints, too_long);
  REQUIRE_THROWS_AS(run_epochs(bad, 1), IndexError);
}

TEST_CASE("Samplers: random orders are uniform permutations", "[data][loader]") {
  // All 6 orders of 3 items, each about 1/6 of the time over 6000 epochs.
  RandomSampler sampler(3, 123);
  std::map<std::vector<size_t>, int> counts;
  for (uint64_t e = 0; e < 6000; ++e) ++counts[sampler.indices(e)];
  REQUIRE(counts.size() == 6);
  for (const auto& [order, count] : counts) {
    REQUIRE(count > 850);  // expected 1000, sd ≈ 29
    REQUIRE(count < 1150);
  }
  std::mt19937_64 gen(5);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 7000; ++i) ++hits[uniform_below(gen, 7)];
  for (int h : hits) REQUIRE(std::abs(h - 1000) < 150);
}

TEST_CASE("BucketBatchSampler: each index once, similar lengths together", "[data][loader]") {
  std::mt19937_64 gen(11);
  std::vector<size_t> lengths(1000);
  for (size_t& l : lengths) l = 1 + uniform_below(gen, 60);

  auto padding = [&](const Batches& batches) {
    size_t pad = 0;
    for (const auto& b : batches) {
      size_t longest = 0;
      for (size_t i : b) longest = std::max(longest, lengths[i]);
      for (size_t i : b) pad += longest - lengths[i];
    }
    return pad;
  };

  BucketBatchSampler bucket(lengths, 16, 3, /*shuffle=*/true, /*drop_last=*/false, /*pool_batches=*/20);
  const Batches b0 = bucket.batches(0), b1 = bucket.batches(1);
  REQUIRE(b0.size() == bucket.num_batches());
  std::vector<size_t> all;
  for (const auto& b : b0) {
    REQUIRE(b.size() <= 16);
    all.insert(all.end(), b.begin(), b.end());
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == i);
  REQUIRE(all.size() == 1000);
  REQUIRE(b0 != b1);
  REQUIRE(bucket.batches(0) == b0);

  ChunkBatchSampler random_batches(std::make_shared<RandomSampler>(1000, 3), 16, false);
  const size_t bucketed = padding(b0), unbucketed = padding(random_batches.batches(0));
  REQUIRE(bucketed * 5 < unbucketed);

  BucketBatchSampler dropping(lengths, 16, 3, true, true, 20);
  const Batches d = dropping.batches(0);
  REQUIRE(d.size() == dropping.num_batches());
  for (const auto& b : d) REQUIRE(b.size() == 16);

  // No shuffle: deterministic and ordered within each pool.
  BucketBatchSampler eval(lengths, 16, 0, false, false, 4);
  REQUIRE(eval.batches(0) == eval.batches(5));
  REQUIRE(eval.batches(0).size() == eval.num_batches());
}

TEST_CASE("DataLoader: pin_memory without a GPU is ignored, as in PyTorch", "[data][loader]") {
  if (cuda::is_available()) return;  // the [cuda] case below covers it
  auto ds = std::make_shared<LambdaDataset<Tensor>>(5, [](size_t i) { return full({2}, double(i)); });
  auto stack_rows = [](std::vector<Tensor> rows) { return stack(rows, 0); };
  auto loader = make_data_loader(ds, stack_rows, DataLoaderOptions(2).pin_memory(true).num_workers(1));
  REQUIRE_FALSE(loader.options().pin_memory_);
  size_t rows = 0;
  for (Tensor& b : loader) {
    REQUIRE_FALSE(b.is_pinned());
    rows += size_t(b.size(0));
  }
  REQUIRE(rows == 5);
}

TEST_CASE("DataLoader: pin_memory gives page-locked batches that copy to the GPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  auto ds = std::make_shared<LambdaDataset<Tensor>>(9, [](size_t i) { return full({3}, double(i) + 0.25); });
  auto stack_rows = [](std::vector<Tensor> rows) { return stack(rows, 0); };
  auto loader = make_data_loader(ds, stack_rows, DataLoaderOptions(4).pin_memory(true).num_workers(2));
  size_t b = 0;
  for (Tensor& batch : loader) {
    REQUIRE(batch.is_pinned());
    Tensor back = batch.to(kCUDA, /*non_blocking=*/true).cpu();
    for (int64_t r = 0; r < back.size(0); ++r)
      for (float v : back[r].to_vector<float>()) REQUIRE(v == float(b * 4 + size_t(r)) + 0.25f);
    ++b;
  }
  REQUIRE(b == 3);
}
