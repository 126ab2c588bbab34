// data::DistributedSampler against PyTorch's DistributedSampler
// (tests/golden/make_distributed_sampler_golden.py): the ranks' indices, the padding
// without drop_last and the cut with it.
#include <fstream>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "data/distributed_sampler.h"
#include "test_util.h"

using namespace loom;
using loom::data::DistributedSampler;
using loom::test::require_throws_with;

TEST_CASE("DistributedSampler: every rank's indices are PyTorch's", "[data][distributed]") {
  std::ifstream in(std::string(LOOM_TEST_DATA_DIR) + "/distributed_sampler.json");
  REQUIRE(in.good());
  nlohmann::json golden = nlohmann::json::parse(in);
  REQUIRE(golden["cases"].size() > 100);
  for (const auto& c : golden["cases"]) {
    size_t n = c["n"], replicas = c["num_replicas"];
    bool drop_last = c["drop_last"], shuffle = c["shuffle"];
    uint64_t epoch = c["epoch"];
    auto order = c["order"].get<std::vector<size_t>>();
    INFO("n " << n << ", num_replicas " << replicas << ", drop_last " << drop_last << ", shuffle " << shuffle);
    for (size_t rank = 0; rank < replicas; ++rank) {
      INFO("rank " << rank);
      auto want = c["ranks"][rank].get<std::vector<size_t>>();
      CHECK(DistributedSampler::shard(order, replicas, rank, drop_last) == want);
      DistributedSampler sampler(n, replicas, rank, shuffle, 7, drop_last);
      CHECK(sampler.size() == want.size());
      std::vector<size_t> got = sampler.indices(epoch);
      CHECK(got.size() == want.size());
      if (!shuffle) CHECK(got == want);
    }
  }
}

TEST_CASE("DistributedSampler: the ranks share one shuffled order, new each epoch", "[data][distributed]") {
  const size_t n = 10, replicas = 4;
  for (bool drop_last : {false, true}) {
    std::vector<std::vector<size_t>> epochs;
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      std::vector<size_t> all;
      for (size_t rank = 0; rank < replicas; ++rank) {
        auto mine = DistributedSampler(n, replicas, rank, true, 3, drop_last).indices(epoch);
        CHECK(mine == DistributedSampler(n, replicas, rank, true, 3, drop_last).indices(epoch));  // pure
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::set<size_t> distinct(all.begin(), all.end());
      // 4 ranks x 3 = 12 with 2 repeated (padding), or 4 x 2 = 8 distinct (cut).
      CHECK(all.size() == (drop_last ? 8u : 12u));
      CHECK(distinct.size() == (drop_last ? 8u : 10u));
      epochs.push_back(all);
    }
    CHECK(epochs[0] != epochs[1]);
  }
}

TEST_CASE("DistributedSampler: a rank not below num_replicas is a ValueError", "[data][distributed]") {
  require_throws_with<ValueError>([] { DistributedSampler(10, 4, 4); }, {"DistributedSampler", "rank 4", "[0, 4)"});
  require_throws_with<ValueError>([] { DistributedSampler(10, 0, 0); }, {"num_replicas"});
}
