// nn::RNNOptions::checkpoint_every(k) (Note [chunked recurrent layers] in
// autograd/functions/rnn_chunked.cpp): outputs, final states and every gradient against the
// same layer unchunked, for RNN tanh/relu, LSTM and GRU, stacks with dropout between layers,
// bidirectional, lengths (rows idle for whole chunks), T not a multiple of k, k >= T,
// batch_first, float32 and float64 and bfloat16 autocast; a zero chunk-local length in the
// layer kernel; a float64 gradcheck; the peak memory of a long sequence; the errors.
#include <cstring>
#include <memory>
#include <optional>

#include "autograd/functions/rnn_layer.h"
#include "examples/text_classification_model.h"
#include "nn/rnn.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const std::vector<std::string> kModes{"rnn_tanh", "rnn_relu", "lstm", "gru"};

std::shared_ptr<nn::RNNBaseImpl> layer_of(const std::string& mode, const nn::RNNOptions& o) {
  if (mode == "lstm") return std::make_shared<nn::LSTMImpl>(o);
  if (mode == "gru") return std::make_shared<nn::GRUImpl>(o);
  return std::make_shared<nn::RNNImpl>(nn::RNNOptions(o).nonlinearity(mode == "rnn_relu" ? "relu" : "tanh"));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && std::memcmp(ca.data(), cb.data(), size_t(ca.nbytes())) == 0;
}

// The largest difference relative to b's largest magnitude.
double relative_error(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  const double scale = b.to(kFloat64).abs().max().item<double>();
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>() / std::max(scale, 1e-300);
}

struct Case {
  std::string name;
  int64_t T, B, L, k;
  bool bidirectional, batch_first;
  double dropout;
  std::vector<int64_t> lengths;  // empty: all T
};

struct Run {
  std::vector<Tensor> outputs;  // y, h_n, c_n (LSTM)
  std::vector<Tensor> grads;    // x, h0, c0 (LSTM), then every parameter
};

// One forward and backward of a fresh layer (the same weights for a given seed) in train
// mode, with dropout drawn from the same generator state; the loss reads every output with
// fixed random weights. autocast: run under CPU autocast to that dtype.
Run run_layer(const std::string& mode, const Case& c, int64_t k, DType dtype, std::optional<DType> autocast = {}) {
  const int64_t I = 5, H = 6, D = c.bidirectional ? 2 : 1;
  manual_seed(21);
  auto m = layer_of(mode, nn::RNNOptions(I, H).num_layers(c.L).bidirectional(c.bidirectional)
                              .batch_first(c.batch_first).dropout(c.dropout).checkpoint_every(k));
  m->to(dtype);
  m->train();
  const Tensor x = random_nonzero(c.batch_first ? Shape{c.B, c.T, I} : Shape{c.T, c.B, I}, dtype, -1, 1)
                       .requires_grad_(true);
  const Tensor h0 = random_nonzero({c.L * D, c.B, H}, dtype, -1, 1).requires_grad_(true);
  const Tensor c0 = mode == "lstm" ? random_nonzero({c.L * D, c.B, H}, dtype, -1, 1).requires_grad_(true) : Tensor();
  const Tensor lengths = c.lengths.empty() ? Tensor() : from_vector<int64_t>(c.lengths, {c.B});
  manual_seed(99);  // the dropout masks
  nn::RNNOutput out;
  {
    std::optional<amp::AutocastGuard> amp;
    if (autocast) amp.emplace(kCPU, *autocast);
    out = m->forward(x, nn::RNNState{h0, c0}, lengths);
  }
  Run r;
  r.outputs = {out.output, out.h_n};
  if (out.c_n.defined()) r.outputs.push_back(out.c_n);
  manual_seed(5);
  Tensor loss = zeros({}, TensorOptions().dtype(kFloat64));
  for (const Tensor& y : r.outputs) loss = loss + (y.to(kFloat64) * randn(y.sizes(), kFloat64)).sum();
  loss.backward();
  for (Tensor& y : r.outputs) y = y.detach();
  r.grads = {x.grad(), h0.grad()};
  if (c0.defined()) r.grads.push_back(c0.grad());
  for (const Tensor& p : m->parameters()) r.grads.push_back(p.grad());
  return r;
}

// The chunked run against the plain one, within tol relative to each tensor's scale.
// Returns whether every tensor is bit-identical.
bool check_same(const Run& chunked, const Run& plain, double tol) {
  REQUIRE(chunked.outputs.size() == plain.outputs.size());
  REQUIRE(chunked.grads.size() == plain.grads.size());
  bool identical = true;
  for (size_t i = 0; i < plain.outputs.size(); ++i) {
    INFO("output " << i);
    CHECK(relative_error(chunked.outputs[i], plain.outputs[i]) <= tol);
    identical &= same_bits(chunked.outputs[i], plain.outputs[i]);
  }
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    INFO("gradient " << i << " (x, h0, c0 for LSTM, then the parameters)");
    REQUIRE(chunked.grads[i].defined());
    CHECK(plain.grads[i].abs().max().item<double>() > 0);
    CHECK(relative_error(chunked.grads[i], plain.grads[i]) <= tol);
    identical &= same_bits(chunked.grads[i], plain.grads[i]);
  }
  return identical;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> v{
      {"1 layer, T=10 k=4", 10, 3, 1, 4, false, false, 0.0, {}},
      {"k=1", 5, 2, 1, 1, false, false, 0.0, {}},
      {"3 layers, dropout, bidirectional, batch_first, T=11 k=3", 11, 3, 3, 3, true, true, 0.4, {}},
      // Rows 1 and 3 sit out whole chunks (chunk-local length 0) in both directions.
      {"2 layers, bidirectional, lengths, T=10 k=4", 10, 4, 2, 4, true, false, 0.0, {10, 3, 7, 1}},
      {"2 layers, dropout, lengths, no row of length T, T=9 k=2", 9, 3, 2, 2, false, false, 0.5, {8, 2, 5}},
  };
  return v;
}

}  // namespace

TEST_CASE("checkpoint_every: outputs and every gradient as the unchunked layer", "[rnn][checkpoint]") {
  for (const std::string& mode : kModes) {
    for (const Case& c : cases()) {
      SECTION(mode + ", " + c.name) {
        check_same(run_layer(mode, c, c.k, kFloat64), run_layer(mode, c, 0, kFloat64), 1e-13);
        // float32: to rounding (the GEMMs see other row counts, the weight gradients are
        // summed chunk by chunk: not bit-identical, see the next test).
        check_same(run_layer(mode, c, c.k, kFloat32), run_layer(mode, c, 0, kFloat32), 2e-6);
      }
    }
  }
}

// Prints which float32 results are bit-identical to the unchunked layer's on the CPU (found:
// LSTM's outputs, RNN's and GRU's not always, next to no gradient), and checks them to rounding.
TEST_CASE("checkpoint_every: float32 on the CPU, which results are bit-identical", "[rnn][checkpoint]") {
  const Case c{"2 layers, bidirectional, lengths", 12, 4, 2, 5, true, false, 0.3, {12, 3, 9, 6}};
  for (const std::string& mode : kModes) {
    INFO(mode);
    const Run plain = run_layer(mode, c, 0, kFloat32), chunked = run_layer(mode, c, c.k, kFloat32);
    size_t same_outputs = 0, same_grads = 0;
    double largest = 0;
    for (size_t i = 0; i < plain.outputs.size(); ++i) {
      same_outputs += same_bits(chunked.outputs[i], plain.outputs[i]);
      largest = std::max(largest, relative_error(chunked.outputs[i], plain.outputs[i]));
    }
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      same_grads += same_bits(chunked.grads[i], plain.grads[i]);
      largest = std::max(largest, relative_error(chunked.grads[i], plain.grads[i]));
    }
    std::printf("%s checkpoint_every(5), float32 on the CPU: %zu of %zu outputs and %zu of %zu gradients bit-identical, "
                "largest relative difference %.3g\n",
                mode.c_str(), same_outputs, plain.outputs.size(), same_grads, plain.grads.size(), largest);
    check_same(chunked, plain, 2e-6);
  }
}

TEST_CASE("checkpoint_every: k >= T and no-grad forwards are the plain path, bit for bit", "[rnn][checkpoint]") {
  const Case c{"T=6", 6, 3, 2, 6, true, false, 0.3, {6, 2, 4}};
  for (const std::string& mode : {std::string("lstm"), std::string("gru")}) {
    INFO(mode);
    CHECK(check_same(run_layer(mode, c, 6, kFloat32), run_layer(mode, c, 0, kFloat32), 0));
    CHECK(check_same(run_layer(mode, c, 100, kFloat32), run_layer(mode, c, 0, kFloat32), 0));
  }
  // Without a gradient wanted, nothing is kept for backward: the plain path, bit for bit.
  manual_seed(4);
  nn::RNN rnn(nn::RNNOptions(3, 4).num_layers(2).checkpoint_every(2));
  const Tensor x = random_nonzero({9, 5, 3});
  const Tensor chunked = rnn(x).output;  // the parameters require grad
  CHECK(chunked.requires_grad());
  NoGradGuard no_grad;
  const Tensor with = rnn(x).output;
  rnn->options.checkpoint_every_ = 0;
  CHECK(same_bits(with, rnn(x).output));
  CHECK(relative_error(chunked, with) < 1e-6);
}

// CPU autocast runs LSTM and RNN in bfloat16 (GRU stays float32: kernels/support/autocast_policy.h).
// The outputs are rounded to bfloat16 from float32 values equal to rounding, so a few may
// land one bfloat16 step (2^-8 relative) apart.
TEST_CASE("checkpoint_every under CPU bfloat16 autocast: as the unchunked layer", "[rnn][checkpoint]") {
  const Case c{"2 layers, bidirectional, lengths", 9, 5, 2, 4, true, false, 0.0, {9, 4, 7, 1, 9}};
  for (const std::string& mode : {std::string("lstm"), std::string("rnn_tanh")}) {
    INFO(mode);
    const Run plain = run_layer(mode, c, 0, kFloat32, kBFloat16), chunked = run_layer(mode, c, c.k, kFloat32, kBFloat16);
    REQUIRE(plain.outputs[0].dtype() == kBFloat16);
    REQUIRE(chunked.outputs[0].dtype() == kBFloat16);
    check_same(chunked, plain, 1e-2);
  }
}

TEST_CASE("rnn layer kernel: a row of length 0 keeps its state and outputs zeros", "[rnn][checkpoint]") {
  manual_seed(6);
  const int64_t T = 3, B = 3, I = 2, H = 4;
  for (const std::string& mode : kModes) {
    for (bool reverse : {false, true}) {
      INFO(mode << (reverse ? " reverse" : ""));
      const RNNMode m = mode == "lstm" ? RNNMode::LSTM : mode == "gru" ? RNNMode::GRU
                                                        : mode == "rnn_relu" ? RNNMode::RNN_RELU : RNNMode::RNN_TANH;
      const int64_t G = rnn_gates(m);
      const Tensor x = random_nonzero({T, B, I}, kFloat64).requires_grad_(true);
      const Tensor h0 = random_nonzero({B, H}, kFloat64).requires_grad_(true);
      const Tensor c0 = m == RNNMode::LSTM ? random_nonzero({B, H}, kFloat64).requires_grad_(true) : Tensor();
      const Tensor w_ih = random_nonzero({G * H, I}, kFloat64, -0.5, 0.5).requires_grad_(true);
      const Tensor w_hh = random_nonzero({G * H, H}, kFloat64, -0.5, 0.5).requires_grad_(true);
      const Tensor b = random_nonzero({G * H}, kFloat64, -0.5, 0.5);
      const RNNLayerResult r = rnn_layer(m, x, h0, c0, w_ih, w_hh, b, b, std::vector<int64_t>{0, 2, 0}, reverse);
      CHECK(r.y.select(1, 0).abs().max().item<double>() == 0);
      CHECK(r.y.select(1, 2).abs().max().item<double>() == 0);
      CHECK(r.y.select(1, 1).abs().max().item<double>() > 0);
      CHECK(same_bits(r.h_n.select(0, 0), h0.detach().select(0, 0)));
      CHECK(same_bits(r.h_n.select(0, 2), h0.detach().select(0, 2)));
      if (c0.defined()) CHECK(same_bits(r.c_n.select(0, 0), c0.detach().select(0, 0)));
      // Backward: the gradient w.r.t. the final state passes to h0 unchanged, none to x.
      const Tensor dh = random_nonzero({B, H}, kFloat64);
      Tensor loss = (r.h_n * dh).sum() + r.y.sum();
      if (c0.defined()) loss = loss + (r.c_n * dh).sum();
      loss.backward();
      CHECK(same_bits(h0.grad().select(0, 0), dh.select(0, 0)));
      if (c0.defined()) CHECK(same_bits(c0.grad().select(0, 0), dh.select(0, 0)));
      CHECK(x.grad().select(1, 0).abs().max().item<double>() == 0);
      CHECK(x.grad().select(1, 1).abs().max().item<double>() > 0);
    }
  }
}

TEST_CASE("checkpoint_every: float64 gradcheck of a chunked bidirectional LSTM with lengths", "[rnn][checkpoint]") {
  manual_seed(7);
  const int64_t I = 2, H = 2, T = 5, B = 3, L = 2, D = 2;
  nn::LSTM m(nn::RNNOptions(I, H).num_layers(L).bidirectional(true).checkpoint_every(2));
  m->to(kFloat64);
  const Tensor x = leaf({T, B, I}, -1, 1), h0 = leaf({L * D, B, H}, -1, 1), c0 = leaf({L * D, B, H}, -1, 1);
  const Tensor lengths = tensor<int64_t>({5, 2, 4});
  std::vector<Tensor> inputs{x, h0, c0};
  for (const Tensor& p : m->parameters()) inputs.push_back(p);
  // Gradcheck perturbs the parameters in place, so f reads them through the module.
  CHECK(gradcheck(
      [&](const std::vector<Tensor>&) {
        const nn::RNNOutput r = m(x, nn::RNNState{h0, c0}, lengths);
        return cat({r.output.flatten(), r.h_n.flatten(), r.c_n.flatten()}, 0);
      },
      inputs));
}

TEST_CASE("checkpoint_every(16): a long LSTM sequence's peak memory (CPU allocator statistics)", "[rnn][checkpoint]") {
  const int64_t T = 256, B = 8, I = 32, H = 64;
  const auto peak = [&](int64_t k, Tensor& grad) {
    manual_seed(12);
    nn::LSTM lstm(nn::RNNOptions(I, H).checkpoint_every(k));
    const Tensor x = random_nonzero({T, B, I}).requires_grad_(true);
    cpu::reset_peak_memory_stats();
    const size_t base = cpu::memory_allocated();
    {
      const nn::RNNOutput out = lstm(x);
      (out.output.sum() + out.h_n.sum()).backward();
    }
    grad = x.grad();
    return cpu::max_memory_allocated() - base;
  };
  Tensor g_plain, g_chunked;
  const size_t plain = peak(0, g_plain), chunked = peak(16, g_chunked);
  std::printf("LSTM (T=%lld, B=%lld, I=%lld, H=%lld) forward + backward: peak %zu bytes, %zu with checkpoint_every(16) (%.2fx)\n",
              static_cast<long long>(T), static_cast<long long>(B), static_cast<long long>(I),
              static_cast<long long>(H), plain, chunked, double(chunked) / double(plain));
  CHECK(relative_error(g_chunked, g_plain) < 1e-5);
  CHECK(double(chunked) < 0.35 * double(plain));  // measured 0.21x
}

// The flagship's model (--checkpoint-every): a few Adam steps on texts of their own lengths,
// with dropout after the LSTM, take the same losses and weights as without.
TEST_CASE("checkpoint_every: the flagship model trains to the same losses and weights", "[rnn][checkpoint]") {
  const auto train = [](int64_t k) {
    manual_seed(31);
    examples::SentimentLSTM model(50, 8, 12, 2, /*dropout=*/0.3, k);
    optim::Adam adam(model.parameters(), optim::AdamOptions(1e-2));
    const Tensor tokens = randint(1, 50, {6, 20});
    const Tensor lengths = from_vector<int64_t>({20, 3, 11, 17, 1, 8}, {6});
    const Tensor labels = from_vector<int64_t>({0, 1, 1, 0, 1, 0}, {6});
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) {
      adam.zero_grad();
      const Tensor loss = nn::functional::cross_entropy(model.forward(tokens, lengths), labels);
      loss.backward();
      adam.step();
      losses.push_back(loss.item<double>());
    }
    return std::pair{losses, model.lstm->parameters()[1].detach().clone()};
  };
  const auto [plain_losses, plain_w] = train(0);
  const auto [losses, w] = train(4);
  REQUIRE(losses.size() == plain_losses.size());
  for (size_t i = 0; i < losses.size(); ++i) CHECK(std::abs(losses[i] - plain_losses[i]) <= 1e-6 * plain_losses[i]);
  CHECK(plain_losses.back() < plain_losses.front());
  CHECK(relative_error(w, plain_w) < 1e-5);
}

TEST_CASE("checkpoint_every: a negative k is a ValueError naming the layer", "[rnn][checkpoint]") {
  require_throws_with<ValueError>([] { nn::LSTM(nn::RNNOptions(4, 3).checkpoint_every(-1)); },
                                  {"LSTM", "checkpoint_every", "-1"});
  nn::GRU gru(nn::RNNOptions(4, 3));
  gru->options.checkpoint_every_ = -2;  // set after construction: checked at the forward
  require_throws_with<ValueError>([&] { gru(random_nonzero({5, 2, 4})); }, {"GRU", "checkpoint_every", "-2"});
}
