// One rank of the distributed_ddp_* tests (nn::parallel::DistributedDataParallel), started
// by loomrun on the loopback. `ddp_worker MODE`:
//
//   equal      ranks start from different weights and data; after 5 Adam steps every
//              rank's parameters are bitwise equal to rank 0's; buffers follow rank 0's
//   big_batch  2 ranks with B texts each equal one process with the 2B texts: the same
//              gradients at every step and the same weights after SGD, to 1e-6 in float64
//   no_sync    k micro-batches, k-1 of them under no_sync(), equal one big batch; under
//              no_sync() the gradients stay local
//   unused     find_unused_parameters: a branch no rank uses keeps no gradient, one only
//              rank 0 uses gets the average; without the option the next forward names it
//   mismatch   rank 1 builds a wider layer: every rank's constructor names it
//   buckets    tiny buckets: the assignment follows Note [gradient buckets], all-reduces
//              start during backward, buckets are rebuilt in ready order, and the
//              gradients still equal one process's
//
// Every check compares against a single-process run computed on the same rank from the
// whole batch (the data is the same on every rank: one seed). Exit status 0 when every
// check passes, 1 otherwise.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/distributed.h"
#include "loom.h"
#include "../random_texts.h"

using namespace loom;
namespace dist = loom::distributed;
namespace F = loom::nn::functional;
using nn::parallel::DistributedDataParallel;
using nn::parallel::DistributedDataParallelOptions;
using test::random_texts;
using test::Texts;

namespace {

int failures = 0, checks = 0;

void check(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    std::cerr << "rank " << dist::get_rank() << ": FAILED: " << what << "\n";
    ++failures;
  }
}

// The flagship's model: Embedding -> LSTM -> Linear over each text's last state; a
// buffer (a running count, like BatchNorm's) to see broadcast_buffers; an optional branch.
struct Classifier : nn::Module {
  explicit Classifier(int64_t hidden = 6)
      : embedding(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(20, 5).padding_idx(0)))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(5, hidden).batch_first(true)))),
        fc(register_module("fc", nn::Linear(hidden, 3))),
        extra(register_module("extra", nn::Linear(hidden, 3))) {
    steps = register_buffer("steps", zeros({1}));
  }
  // use_extra: add the branch's output (the `unused` mode turns it off).
  Tensor forward(const Tensor& tokens, const Tensor& lengths, bool use_extra = true) {  // (B, T), (B)
    steps.add_(1);
    Tensor h = lstm(embedding(tokens), nn::RNNState{}, lengths).h_n[0];  // (B, H)
    Tensor logits = fc(h);                                               // (B, 3)
    return use_extra ? logits + extra(h) : logits;
  }
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear fc, extra;
  Tensor steps;
};

// A model built from `seed` (so two calls give the same weights), in float64.
std::shared_ptr<Classifier> model_from(uint64_t seed, int64_t hidden = 6) {
  manual_seed(seed);
  auto m = std::make_shared<Classifier>(hidden);
  m->to(kFloat64);
  return m;
}

double largest_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b, double* largest = nullptr) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<double> x = a[i].to_vector<double>(), y = b[i].to_vector<double>();
    for (size_t j = 0; j < x.size(); ++j) {
      worst = std::max(worst, std::abs(x[j] - y[j]));
      if (largest) *largest = std::max(*largest, std::abs(y[j]));
    }
  }
  return worst;
}

std::vector<Tensor> grads(const std::vector<Tensor>& params) {
  std::vector<Tensor> g;
  for (const Tensor& p : params) g.push_back(p.grad().defined() ? p.grad() : zeros_like(p));
  return g;
}

// a's gradients equal b's to 1e-6, and are real (not all zero).
void check_same_gradients(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& what) {
  double largest = 0;
  double worst = largest_difference(grads(a), grads(b), &largest);
  check(largest > 1e-3, what + ": gradients are all near zero (largest " + std::to_string(largest) + ")");
  check(worst <= 1e-6, what + ": gradients differ by " + std::to_string(worst));
}

// Every rank's copy of t, gathered; true when each is bitwise equal to rank 0's.
bool same_on_every_rank(const Tensor& t) {
  Tensor flat = t.detach().contiguous().reshape({-1});
  std::vector<Tensor> all;
  for (int r = 0; r < dist::get_world_size(); ++r) all.push_back(empty_like(flat));
  dist::all_gather(all, flat)->wait();
  for (const Tensor& other : all)
    if (std::memcmp(other.data(), all[0].data(), flat.nbytes()) != 0) return false;
  return true;
}

void run_equal() {
  const int rank = dist::get_rank();
  auto model = model_from(100 + uint64_t(rank));  // different weights on every rank
  model->to(kFloat32);
  model->steps.fill_(double(10 * rank));          // and a different buffer
  DistributedDataParallel ddp(model);
  const Tensor initial = model->parameters()[0].clone();
  check(same_on_every_rank(initial), "parameters broadcast at construction");
  check(same_on_every_rank(model->steps), "buffers broadcast at construction");
  optim::Adam opt(ddp.parameters(), 0.05);
  manual_seed(7 + uint64_t(rank));  // different data on every rank
  for (int step = 0; step < 5; ++step) {
    Texts batch = random_texts(8, 6);
    opt.zero_grad();
    F::cross_entropy(ddp(batch.tokens, batch.lengths), batch.labels).backward();
    for (const Tensor& p : model->parameters())
      check(same_on_every_rank(p.grad()), "gradients equal after backward, step " + std::to_string(step));
    opt.step();
  }
  bool all_equal = true;
  for (const Tensor& p : model->parameters()) all_equal = all_equal && same_on_every_rank(p);
  check(all_equal, "parameters bitwise equal on every rank after 5 Adam steps");
  check(largest_difference({model->parameters()[0]}, {initial}) > 1e-3, "training changed the weights");
  // Each forward adds 1 to rank 0's broadcast buffer: 0 + 5 on every rank.
  check(model->steps.item<double>() == 5.0, "buffer is rank 0's after every forward (got " +
                                                std::to_string(model->steps.item<double>()) + ")");
}

void run_big_batch() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const int64_t b = 6;
  auto model = model_from(1), single = model_from(1);
  DistributedDataParallel ddp(model);
  optim::SGD opt(ddp.parameters(), optim::SGDOptions(0.3).momentum(0.9));
  optim::SGD single_opt(single->parameters(), optim::SGDOptions(0.3).momentum(0.9));
  manual_seed(3);
  for (int step = 0; step < 4; ++step) {
    Texts whole = random_texts(world * b, 7);
    Texts mine = whole.slice(rank * b, b);
    opt.zero_grad();
    single_opt.zero_grad();
    F::cross_entropy(ddp(mine.tokens, mine.lengths), mine.labels).backward();
    F::cross_entropy(single->forward(whole.tokens, whole.lengths), whole.labels).backward();
    check_same_gradients(model->parameters(), single->parameters(), "big_batch step " + std::to_string(step));
    opt.step();
    single_opt.step();
  }
  double worst = largest_difference(model->parameters(), single->parameters());
  check(worst <= 1e-6, "weights after 4 SGD steps differ from one process's by " + std::to_string(worst));
}

void run_no_sync() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const int64_t b = 4, k = 3;
  auto model = model_from(2), single = model_from(2), local = model_from(2);
  DistributedDataParallel ddp(model);
  manual_seed(5);
  Texts whole = random_texts(world * k * b, 6);  // micro-batch m of rank r: rows (m·world + r)·b
  Texts first = whole.slice(rank * b, b);
  {
    auto guard = ddp.no_sync();
    check(!ddp.require_backward_grad_sync(), "no_sync() turns synchronization off");
    F::cross_entropy(ddp(first.tokens, first.lengths), first.labels).div(double(k)).backward();
  }
  check(ddp.require_backward_grad_sync(), "no_sync() restores synchronization when it ends");
  F::cross_entropy(local->forward(first.tokens, first.lengths), first.labels).div(double(k)).backward();
  check_same_gradients(model->parameters(), local->parameters(), "under no_sync the gradients are the rank's own");
  {
    auto guard = ddp.no_sync();
    Texts m = whole.slice((world + rank) * b, b);
    F::cross_entropy(ddp(m.tokens, m.lengths), m.labels).div(double(k)).backward();
  }
  Texts last = whole.slice((2 * world + rank) * b, b);
  F::cross_entropy(ddp(last.tokens, last.lengths), last.labels).div(double(k)).backward();
  F::cross_entropy(single->forward(whole.tokens, whole.lengths), whole.labels).backward();
  check_same_gradients(model->parameters(), single->parameters(), "no_sync accumulation over 3 micro-batches");
}

void run_unused() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const int64_t b = 5;
  auto model = model_from(4);
  manual_seed(6);
  Texts whole = random_texts(world * b, 6);
  Texts mine = whole.slice(rank * b, b);
  {
    // `extra` unused on every rank: its gradient stays undefined; the rest are averaged.
    auto single = model_from(4);
    DistributedDataParallel ddp(model, DistributedDataParallelOptions().find_unused_parameters(true));
    F::cross_entropy(ddp(mine.tokens, mine.lengths, false), mine.labels).backward();
    F::cross_entropy(single->forward(whole.tokens, whole.lengths, false), whole.labels).backward();
    check(!model->extra->weight.grad().defined(), "a parameter no rank used keeps no gradient");
    check_same_gradients(model->fc->parameters(), single->fc->parameters(), "used parameters beside unused ones");
    // Used by rank 0 only: every rank gets (rank 0's gradient + 0 + ...) / world.
    model->zero_grad();
    F::cross_entropy(ddp(mine.tokens, mine.lengths, rank == 0), mine.labels).backward();
    auto alone = model_from(4);
    Texts first = whole.slice(0, b);
    F::cross_entropy(alone->forward(first.tokens, first.lengths, true), first.labels).div(double(world)).backward();
    check(model->extra->weight.grad().defined(), "a parameter rank 0 used has a gradient on every rank");
    check_same_gradients(model->extra->parameters(), alone->extra->parameters(),
                         "a parameter only rank 0 used: rank 0's gradient over the world size");
  }
  {
    // Without find_unused_parameters the reduction cannot finish; the next forward says why.
    auto fresh = model_from(4);
    DistributedDataParallel ddp(fresh);
    F::cross_entropy(ddp(mine.tokens, mine.lengths, false), mine.labels).backward();
    std::string message;
    try {
      ddp(mine.tokens, mine.lengths, false);
    } catch (const ValueError& e) {
      message = e.what();
    }
    check(message.find("find_unused_parameters") != std::string::npos && message.find("'extra.weight'") != std::string::npos,
          "the next forward names the unused parameter and the option (got: " + message + ")");
    // Once said, the wrapper works again: a forward that uses everything trains.
    fresh->zero_grad();
    F::cross_entropy(ddp(mine.tokens, mine.lengths, true), mine.labels).backward();
    check(fresh->extra->weight.grad().defined(), "training goes on after the error");
  }
}

void run_mismatch() {
  const int rank = dist::get_rank();
  auto model = model_from(8, rank == 1 ? 7 : 6);  // rank 1's LSTM is wider
  std::string message;
  try {
    DistributedDataParallel ddp(model);
  } catch (const ValueError& e) {
    message = e.what();
  }
  check(message.find("'lstm.weight_ih_l0'") != std::string::npos && message.find("rank 1") != std::string::npos &&
            message.find("rank 0") != std::string::npos,
        "the constructor names the first differing parameter and the ranks (got: " + message + ")");
}

void run_buckets() {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const int64_t b = 4;
  // 0.0005 MiB = 524 bytes: each float64 parameter of more than 65 elements fills a bucket.
  auto model = model_from(9), single = model_from(9);
  DistributedDataParallel ddp(model, DistributedDataParallelOptions().bucket_cap_mb(0.0005));
  // The expected assignment: reverse registration order, close a bucket at >= 524 bytes.
  const std::vector<Tensor> params = model->parameters();
  const int64_t cap = int64_t(0.0005 * 1024 * 1024);
  std::vector<std::vector<size_t>> expected(1);
  int64_t bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {
    expected.back().push_back(k);
    bytes += int64_t(params[k].nbytes());
    if (bytes >= cap) {
      expected.emplace_back();
      bytes = 0;
    }
  }
  if (expected.back().empty()) expected.pop_back();
  check(ddp.reducer().bucket_indices() == expected, "the buckets follow Note [gradient buckets]");
  check(expected.size() >= 3, "the test has several buckets");

  // All-reduces start during backward: when the embedding's gradient (the last to arrive,
  // alone in the last bucket) reaches its leaf hook, before the reducer sees it, every
  // other bucket is already queued.
  const auto& reducer = ddp.reducer();
  size_t launched_before_last = 0;
  params[0].register_hook([&](const Tensor& g) {
    launched_before_last = reducer.buckets_launched();
    return g;
  });
  manual_seed(10);
  for (int step = 0; step < 3; ++step) {
    Texts whole = random_texts(world * b, 6);
    Texts mine = whole.slice(rank * b, b);
    model->zero_grad();
    single->zero_grad();
    launched_before_last = 0;
    F::cross_entropy(ddp(mine.tokens, mine.lengths), mine.labels).backward();
    check(launched_before_last + 1 == reducer.bucket_indices().size(),
          "all buckets but the last were launched during backward (" + std::to_string(launched_before_last) + " of " +
              std::to_string(reducer.bucket_indices().size()) + ")");
    F::cross_entropy(single->forward(whole.tokens, whole.lengths), whole.labels).backward();
    check_same_gradients(model->parameters(), single->parameters(), "many buckets, step " + std::to_string(step));
    if (step == 0) check(!reducer.buckets_rebuilt(), "the buckets are rebuilt at the second forward, not before");
  }
  check(ddp.reducer().buckets_rebuilt(), "the buckets were rebuilt after the first step");
  check(same_on_every_rank(params[0].grad()), "gradients equal on every rank with rebuilt buckets");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(60)));
    const std::map<std::string, std::function<void()>> modes = {
        {"equal", run_equal},   {"big_batch", run_big_batch}, {"no_sync", run_no_sync},
        {"unused", run_unused}, {"mismatch", run_mismatch},   {"buckets", run_buckets}};
    auto it = modes.find(mode);
    if (it == modes.end()) {
      std::cerr << "ddp_worker: unknown mode '" << mode << "'\n";
      return 2;
    }
    it->second();
    dist::barrier()->wait();
    dist::destroy_process_group();
    std::cout << "rank " << std::getenv("RANK") << " " << mode << ": " << checks - failures << " of " << checks
              << " checks passed\n";
    return failures == 0 && checks > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "rank " << (std::getenv("RANK") ? std::getenv("RANK") : "?") << " " << mode << ": " << e.what() << "\n";
    return 1;
  }
}
