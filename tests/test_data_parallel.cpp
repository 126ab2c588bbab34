// DistributedDataParallel inside one process, over a Gloo group of one: its argument
// errors, and that wrapping changes nothing in a world of one (the average of one rank's
// gradients is that rank's). Across real processes: the CTest tests distributed_ddp_*
// (tests/distributed/ddp_worker.cpp).
#include <chrono>

#include "distributed/distributed.h"
#include "test_util.h"

using namespace loom;
using loom::test::require_throws_with;
using nn::parallel::DistributedDataParallel;
using nn::parallel::DistributedDataParallelOptions;
namespace F = loom::nn::functional;

namespace {

struct TwoLayers : nn::Module {
  TwoLayers() : fc1(register_module("fc1", nn::Linear(4, 8))), fc2(register_module("fc2", nn::Linear(8, 2))) {}
  Tensor forward(const Tensor& x) { return fc2(fc1(x).tanh()); }
  nn::Linear fc1, fc2;
};

std::unique_ptr<distributed::ProcessGroupGloo> world_of_one() {
  auto store = std::make_shared<distributed::TCPStore>("127.0.0.1", 0, true, std::chrono::milliseconds(5000));
  return std::make_unique<distributed::ProcessGroupGloo>(
      store, 0, 1, distributed::ProcessGroupGlooOptions().timeout(std::chrono::milliseconds(5000)));
}

}  // namespace

TEST_CASE("DistributedDataParallel: in a world of one it trains as the bare model", "[distributed]") {
  auto group = world_of_one();
  manual_seed(3);
  auto wrapped = std::make_shared<TwoLayers>();
  manual_seed(3);
  auto bare = std::make_shared<TwoLayers>();
  DistributedDataParallel ddp(wrapped, *group, DistributedDataParallelOptions().bucket_cap_mb(0.0001));
  CHECK(ddp.reducer().bucket_indices().size() >= 2);
  optim::SGD a(ddp.parameters(), 0.1), b(bare->parameters(), 0.1);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({5, 4}), y = randint(0, 2, {5});
    a.zero_grad();
    b.zero_grad();
    F::cross_entropy(ddp(x), y).backward();
    F::cross_entropy(bare->forward(x), y).backward();
    for (size_t i = 0; i < bare->parameters().size(); ++i) {
      CHECK(bare->parameters()[i].grad().abs().max().item<double>() > 0);
      CHECK(allclose(wrapped->parameters()[i].grad(), bare->parameters()[i].grad(), 0, 1e-7));
    }
    a.step();
    b.step();
  }
  CHECK(ddp.reducer().buckets_rebuilt());
  // Without grad (evaluation) the reducer is not armed: a forward, then a training step.
  {
    NoGradGuard no_grad;
    (void)ddp(randn({2, 4}));
  }
  a.zero_grad();
  F::cross_entropy(ddp(randn({3, 4})), randint(0, 2, {3})).backward();
  CHECK(wrapped->fc1->weight.grad().defined());
}

TEST_CASE("DistributedDataParallel: bad options and misuse are clear errors", "[distributed]") {
  auto group = world_of_one();
  auto model = std::make_shared<TwoLayers>();
  require_throws_with<ValueError>(
      [&] { DistributedDataParallel ddp(model, *group, DistributedDataParallelOptions().bucket_cap_mb(0)); },
      {"DistributedDataParallel", "bucket_cap_mb", "positive"});
  require_throws_with<ValueError>(
      [&] { DistributedDataParallel ddp(std::shared_ptr<TwoLayers>(), *group); }, {"DistributedDataParallel", "null"});
}
