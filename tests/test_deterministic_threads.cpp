// Deterministic mode on the CPU, op by op: every op the examples' training steps run gives
// the same bits at 1 and at 2 threads (Note [deterministic algorithms], core/deterministic.h),
// forward and backward, at sizes where the threads do split the work. Each section runs a
// step twice from the same seed and compares every output's and gradient's bytes.
#include <cstring>
#include <functional>

#include "test_util.h"

#include "autograd/autocast.h"
#include "core/deterministic.h"
#include "core/parallel.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/layer_norm.h"
#include "nn/rnn.h"
#include "nn/transformer.h"

using namespace loom;
using namespace loom::test;

namespace {

struct ModeAndThreads {
  bool mode = are_deterministic_algorithms_enabled(), warn = is_deterministic_algorithms_warn_only_enabled();
  int threads = get_num_threads();
  ~ModeAndThreads() {
    use_deterministic_algorithms(mode, warn);
    set_num_threads(threads);
  }
};

std::vector<std::string> bytes_of(const std::vector<Tensor>& ts) {
  std::vector<std::string> out;
  for (const Tensor& t : ts) {
    const Tensor c = t.contiguous();
    out.emplace_back(static_cast<const char*>(c.data()), size_t(c.nbytes()));
  }
  return out;
}

// step(seed) -> the tensors to compare (outputs and gradients), run at 1 and 2 threads.
void check_same_bits(const std::function<std::vector<Tensor>()>& step) {
  const ModeAndThreads restore;
  use_deterministic_algorithms(true);
  for (uint64_t seed : {5, 6}) {
    INFO("seed " << seed);
    set_num_threads(1);
    manual_seed(seed);
    const auto one = bytes_of(step());
    set_num_threads(2);
    manual_seed(seed);
    const auto two = bytes_of(step());
    REQUIRE(one.size() == two.size());
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("tensor " << i);
      CHECK(one[i] == two[i]);
    }
  }
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> g;
  for (const Tensor& p : params) g.push_back(p.grad());
  return g;
}

}  // namespace

TEST_CASE("deterministic mode: an LSTM over lengths, forward and backward, same bits at 1 and 2 threads",
          "[deterministic][rnn]") {
  for (bool bf16 : {false, true}) {
    INFO((bf16 ? "under bfloat16 autocast" : "float32"));
    check_same_bits([bf16] {
      nn::Embedding embedding(nn::EmbeddingOptions(300, 48).padding_idx(0));
      nn::LSTM lstm(nn::RNNOptions(48, 96).batch_first(true));
      const Tensor tokens = randint(1, 300, {64, 30});
      std::vector<int64_t> lens(64);
      for (size_t b = 0; b < lens.size(); ++b) lens[b] = 30 - int64_t(b % 23);
      const Tensor lengths = from_vector(lens);
      Tensor out;
      {
        const amp::AutocastGuard amp(kCPU, kBFloat16, bf16);
        out = lstm(embedding(tokens), nn::RNNState{}, lengths).h_n[0];  // (B, H)
      }
      out.float_().pow(2.0).sum().backward();
      std::vector<Tensor> all = grads_of(lstm->parameters());
      all.push_back(embedding->weight.grad());
      all.push_back(out);
      return all;
    });
  }
}

TEST_CASE("deterministic mode: a Transformer encoder layer with padding and dropout, same bits at 1 and 2 threads",
          "[deterministic][attention]") {
  for (int64_t batch : {2, 16}) {  // 2: attention's backward splits each matrix's keys in runs
    INFO("batch " << batch);
    check_same_bits([batch] {
      nn::TransformerEncoderLayer layer(
          nn::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64).dropout(0.1).batch_first(true).norm_first(true));
      const Tensor x = random_nonzero({batch, 200, 32}).requires_grad_(true);
      const Tensor padding = arange(200, TensorOptions(kInt64)).reshape({1, 200}).ge(full({batch, 1}, 150.0, kInt64));
      const Tensor y = layer(x, Tensor(), padding);
      (y * y).mean().backward();
      std::vector<Tensor> all = grads_of(layer->parameters());
      all.push_back(x.grad());
      all.push_back(y);
      return all;
    });
  }
}

TEST_CASE("deterministic mode: losses, reductions and layer norm over large rows, same bits at 1 and 2 threads",
          "[deterministic]") {
  check_same_bits([] {
    const Tensor logits = random_nonzero({4096, 40}).requires_grad_(true);
    const Tensor target = randint(0, 40, {4096});
    const Tensor x = random_nonzero({512, 768}).requires_grad_(true);
    nn::LayerNorm norm(768);
    const Tensor loss = nn::functional::cross_entropy(logits, target) + norm(x).softmax(-1).log().mean() +
                        x.abs().sum(0).mean() + x.norm() + x.var({1}).sum();
    loss.backward();
    return std::vector<Tensor>{loss, logits.grad(), x.grad(), norm->weight.grad(), norm->bias.grad()};
  });
}
