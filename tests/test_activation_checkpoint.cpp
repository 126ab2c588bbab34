// loom::checkpoint (autograd/activation_checkpoint.h): float64 gradcheck through a
// checkpointed segment and gradients equal to the segment's without it (inputs, parameters
// it captures, an input that needs no gradient, loom::grad); dropout masks identical in the
// recomputation and the generator left as the forward left it; the forward's autocast
// state; nesting; the errors (a recomputation of another shape, an input changed in place);
// the activations freed, measured by the CPU allocator; the recomputation's early stop; and
// TransformerEncoder's checkpoint_layers and checkpoint_blocks giving the same losses and
// gradients with less memory.
#include <cmath>
#include <cstring>

#include "test_util.h"

#include "autograd/activation_checkpoint.h"
#include "autograd/functions/attention.h"
#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/memory.h"
#include "core/ops.h"
#include "nn/transformer.h"

using namespace loom;
using namespace loom::test;

namespace {

// A segment with several saved activations: x (B, D) -> tanh(x W1) W2 -> sigmoid, times x.
Tensor segment(const Tensor& x, const Tensor& w1, const Tensor& w2) {
  return x.matmul(w1).tanh().matmul(w2).sigmoid() * x;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && std::memcmp(ca.data(), cb.data(), size_t(ca.nbytes())) == 0;
}

// Within a few float64 ulps of the largest element.
bool close(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && (a - b).abs().max().item<double>() <= 1e-14 * b.abs().max().item<double>();
}

}  // namespace

TEST_CASE("checkpoint: float64 gradcheck, and the gradients of the plain segment", "[checkpoint_activations]") {
  manual_seed(1);
  const Tensor x = leaf({3, 4}), w1 = leaf({4, 5}, -0.5, 0.5), w2 = leaf({5, 4}, -0.5, 0.5);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return checkpoint(segment, in[0], in[1], in[2]); }, {x, w1, w2}));

  const Tensor up = random_nonzero({3, 4}, kFloat64);  // a non-trivial upstream gradient
  zero_grad({x, w1, w2});
  (segment(x, w1, w2) * up).sum().backward();
  const std::vector<Tensor> plain{x.grad().clone(), w1.grad().clone(), w2.grad().clone()};
  zero_grad({x, w1, w2});
  const Tensor y = checkpoint(segment, x, w1, w2);
  REQUIRE(y.requires_grad());
  (y * up).sum().backward();
  // Equal within rounding: the CPU matmul's order may follow its operands' alignment, which
  // the recomputed activations need not share (bit-equal elsewhere in this file).
  CHECK(close(x.grad(), plain[0]));
  CHECK(close(w1.grad(), plain[1]));
  CHECK(close(w2.grad(), plain[2]));
}

TEST_CASE("checkpoint: captured parameters, an input without grad, loom::grad, several outputs",
          "[checkpoint_activations]") {
  manual_seed(2);
  const Tensor x = random_nonzero({6, 4}, kFloat64);  // needs no gradient
  const Tensor w1 = leaf({4, 8}, -0.5, 0.5), w2 = leaf({8, 4}, -0.5, 0.5);
  const auto fn = [&](const Tensor& in) { return segment(in, w1, w2); };
  const std::vector<Tensor> want = grad({fn(x).pow(2.0).sum()}, {w1, w2});
  const Tensor y = checkpoint(fn, x);
  REQUIRE(y.requires_grad());  // through the parameters it captured
  const std::vector<Tensor> got = grad({y.pow(2.0).sum()}, {w1, w2});
  // Within ulps: a float64 product of these odd sizes rounds with its buffers' alignment, so
  // its last bit follows what else the process allocated (two plain runs can differ too).
  CHECK(close(got[0], want[0]));
  CHECK(close(got[1], want[1]));
  CHECK_FALSE(w1.grad().defined());  // loom::grad leaves .grad() alone, through the recomputation too

  // Two outputs, one used: the other's branch gets no gradient and nothing breaks.
  const Tensor a = leaf({5}), b = leaf({5});
  const std::vector<Tensor> outs = checkpoint(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].exp() * in[1], in[1].tanh()}; }, {a, b});
  (outs[0] * outs[0]).sum().backward();
  const Tensor a2 = a.detach().requires_grad_(true), b2 = b.detach().requires_grad_(true);
  const Tensor ref = a2.exp() * b2;
  (ref * ref).sum().backward();
  CHECK(same_bits(a.grad(), a2.grad()));
  CHECK(same_bits(b.grad(), b2.grad()));
}

TEST_CASE("checkpoint: dropout draws the same masks in the recomputation, and the generator is put back",
          "[checkpoint_activations]") {
  const auto fn = [](const Tensor& x, const Tensor& w) { return dropout(x.matmul(w).tanh(), 0.5, true).matmul(w.t()); };
  manual_seed(3);
  const Tensor x = leaf({16, 32}), w = leaf({32, 32}, -0.2, 0.2);
  manual_seed(99);
  fn(x, w).sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  zero_grad({x, w});
  manual_seed(99);
  const Tensor y = checkpoint(fn, x, w);
  const uint64_t offset_after_forward = default_generator().offset();
  y.sum().backward();
  CHECK(default_generator().offset() == offset_after_forward);  // the recomputation's draws given back
  CHECK(same_bits(x.grad(), gx));  // a different mask would zero other elements
  CHECK(same_bits(w.grad(), gw));
  // A draw after backward continues the sequence as without checkpoint.
  manual_seed(99);
  fn(x, w);
  CHECK(default_generator().offset() == offset_after_forward);
}

TEST_CASE("checkpoint: the recomputation runs under the forward's autocast state", "[checkpoint_activations]") {
  manual_seed(4);
  const Tensor x = random_nonzero({8, 16}).requires_grad_(true), w = random_nonzero({16, 16}).requires_grad_(true);
  const auto fn = [](const Tensor& a, const Tensor& b) { return a.matmul(b).relu().matmul(b); };
  Tensor plain, checkpointed;
  {
    amp::AutocastGuard bf16(kCPU);
    plain = fn(x, w);
  }
  REQUIRE(plain.dtype() == kBFloat16);
  plain.float_().sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  zero_grad({x, w});
  {
    amp::AutocastGuard bf16(kCPU);
    checkpointed = checkpoint(fn, x, w);
  }
  // Backward runs outside the region: a float32 recomputation would save float32 tensors
  // where the forward saved bfloat16 ones (an error), and give other gradients.
  checkpointed.float_().sum().backward();
  CHECK(same_bits(x.grad(), gx));
  CHECK(same_bits(w.grad(), gw));
}

TEST_CASE("checkpoint: nested checkpoints give the plain gradients", "[checkpoint_activations]") {
  manual_seed(5);
  const Tensor x = leaf({4, 6}), w = leaf({6, 6}, -0.4, 0.4);
  const auto inner = [](const Tensor& a, const Tensor& b) { return dropout(a.matmul(b).tanh(), 0.3, true); };
  const auto outer = [&](const Tensor& a, const Tensor& b) {
    const Tensor h = a.sigmoid() * a;
    return checkpoint(inner, h, b).matmul(b).exp() + checkpoint(inner, h * 2.0, b).sum();
  };
  manual_seed(7);
  const auto plain_outer = [&](const Tensor& a, const Tensor& b) {
    const Tensor h = a.sigmoid() * a;
    return inner(h, b).matmul(b).exp() + inner(h * 2.0, b).sum();
  };
  plain_outer(x, w).sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  zero_grad({x, w});
  manual_seed(7);
  checkpoint(outer, x, w).sum().backward();
  CHECK(same_bits(x.grad(), gx));
  CHECK(same_bits(w.grad(), gw));
  CHECK(gradcheck([&](const std::vector<Tensor>& in) {
    return checkpoint([&](const Tensor& a, const Tensor& b) { return checkpoint(segment, a, b, b.t()) * a; }, in[0], in[1]);
  }, {leaf({3, 3}), leaf({3, 3}, -0.5, 0.5)}));
}

TEST_CASE("checkpoint: a recomputation of another shape, and an input changed in place, are errors",
          "[checkpoint_activations]") {
  manual_seed(6);
  const Tensor x = leaf({4, 4});
  int64_t rows = 4;
  const auto fn = [&](const Tensor& a) { return a.narrow(0, 0, rows).exp().sum(); };
  const Tensor y = checkpoint(fn, x);
  rows = 2;  // fn now runs differently
  require_throws_with<AutogradError>([&] { y.backward(); }, {"checkpoint", "differs from the forward", "(2, 4)", "(4, 4)"});

  const Tensor x2 = leaf({3});
  Tensor z = x2 * 1.0;
  const Tensor y2 = checkpoint([](const Tensor& a) { return (a.exp() * a).sum(); }, z);
  {
    NoGradGuard no_grad;
    z.mul_(2.0);
  }
  require_throws_with<AutogradError>([&] { y2.backward(); }, {"modified by an in-place operation", "checkpoint"});

  // With grad mode off, checkpoint just runs fn.
  NoGradGuard no_grad;
  CHECK_FALSE(checkpoint(fn, x).requires_grad());
}

TEST_CASE("checkpoint: the recomputation stops at the last saved tensor", "[checkpoint_activations]") {
  manual_seed(7);
  const Tensor x = leaf({5, 6}), w = leaf({6, 6}, -0.5, 0.5);
  int tails = 0;  // runs of what fn does after its last save
  const auto fn = [&](const Tensor& a) {
    const Tensor h = a.matmul(w).tanh();  // tanh saves its output: the last save
    ++tails;
    return h + 1.0;  // an add by a number saves nothing
  };
  fn(x).sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  zero_grad({x, w});
  tails = 0;
  checkpoint(fn, x).sum().backward();
  CHECK(tails == 1);  // the forward's run only
  // Within ulps, as above.
  CHECK(close(x.grad(), gx));
  CHECK(close(w.grad(), gw));
}

TEST_CASE("checkpoint keep_attention: the attention's outputs kept, the same gradients", "[checkpoint_activations]") {
  // q, k, v projections of x, attention with dropout, an output projection: (2, 4, 64, 8).
  manual_seed(12);
  const Tensor x = random_nonzero({2, 4, 64, 8}).requires_grad_(true);
  const Tensor w = (random_nonzero({8, 8}) * 0.3).requires_grad_(true);
  const auto fn = [&](const Tensor& in) {
    const Tensor h = in.matmul(w);
    return scaled_dot_product_attention(h.tanh(), h.sigmoid(), h, Tensor(), /*dropout_p=*/0.25).matmul(w);
  };
  const auto run = [&](int mode, size_t& held) {  // 0 plain, 1 checkpoint, 2 with keep_attention
    zero_grad({x, w});
    manual_seed(5);
    const size_t base = cpu::memory_allocated();
    const Tensor y = mode == 0 ? fn(x)
                               : checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
                                            {x}, CheckpointOptions{.keep_attention = mode == 2})[0];
    held = cpu::memory_allocated() - base;
    y.pow(2.0).sum().backward();
    return std::pair{x.grad().clone(), w.grad().clone()};
  };
  size_t held[3] = {};
  const auto plain = run(0, held[0]);
  for (int mode : {1, 2}) {
    INFO("mode " << mode);
    const auto [gx, gw] = run(mode, held[mode]);
    CHECK(same_bits(gx, plain.first));  // the same dropout bits, the same attention
    CHECK(same_bits(gw, plain.second));
  }
  // Kept through the checkpoint: the output (2, 4, 64, 8) and log-sum-exp (2 * 4, 64), float.
  CHECK(held[2] == held[1] + (2 * 4 * 64 * 8 + 2 * 4 * 64) * 4);
}

TEST_CASE("checkpoint frees the segment's activations after forward (CPU allocator statistics)",
          "[checkpoint_activations]") {
  manual_seed(8);
  const int64_t rows = 2048, width = 128, depth = 8;
  const Tensor x = random_nonzero({rows, width}).requires_grad_(true);
  std::vector<Tensor> ws;
  for (int64_t i = 0; i < depth; ++i) ws.push_back((random_nonzero({width, width}) * 0.05).requires_grad_(true));
  // Two segments of four layers each; a layer saves h, w and tanh's output.
  const auto layers = [&](int64_t first) {
    return [&, first](const Tensor& in) {
      Tensor h = in;
      for (int64_t i = first; i < first + depth / 2; ++i) h = h.matmul(ws[size_t(i)]).tanh();
      return h;
    };
  };
  const auto deep = [&](const Tensor& in, bool use_checkpoint) {
    Tensor h = in;
    for (int64_t first : {int64_t(0), depth / 2}) h = use_checkpoint ? checkpoint(layers(first), h) : layers(first)(h);
    return h;
  };
  struct Measure {
    size_t held_after_forward, peak;
  };
  const auto measure = [&](bool use_checkpoint) {
    zero_grad(ws);
    zero_grad({x});
    cpu::reset_peak_memory_stats();
    const size_t base = cpu::memory_allocated();
    Measure m{};
    {
      const Tensor y = deep(x, use_checkpoint);
      m.held_after_forward = cpu::memory_allocated() - base;
      y.sum().backward();
    }
    m.peak = cpu::max_memory_allocated() - base;
    return m;
  };
  const Measure plain = measure(false);
  const Tensor g_plain = ws[0].grad().clone();
  const Measure with = measure(true);
  std::printf("checkpoint over %lld tanh layers of (%lld, %lld) in 2 segments: held after forward %zu -> %zu bytes, peak %zu -> %zu\n",
              static_cast<long long>(depth), static_cast<long long>(rows), static_cast<long long>(width),
              plain.held_after_forward, with.held_after_forward, plain.peak, with.peak);
  const size_t activation = size_t(rows * width) * 4;
  CHECK(plain.held_after_forward >= size_t(depth) * activation);  // each layer's tanh output at least
  CHECK(with.held_after_forward <= 2 * activation);               // the two segments' outputs
  CHECK(with.peak < plain.peak);  // one segment's activations at a time in backward
  CHECK(same_bits(ws[0].grad(), g_plain));
}

TEST_CASE("TransformerEncoderOptions::checkpoint_layers and checkpoint_blocks: the same losses and gradients, less memory",
          "[checkpoint_activations][transformer]") {
  enum Mode { kPlain, kLayers, kBlocks, kNested };  // kNested: both, the blocks' checkpoints inside the layers'
  const char* names[] = {"plain", "checkpoint_layers", "checkpoint_blocks", "checkpoint_layers + checkpoint_blocks"};
  const int64_t layers = 3, steps = 2;
  struct Run {
    std::vector<double> losses;
    std::vector<Tensor> grads;
    size_t peak = 0;
    uint64_t attention_runs = 0;  // the fused attention's forwards over the steps
  };
  const auto run = [&](Mode mode, bool norm_first, bool keep_attention) {
    manual_seed(9);
    nn::TransformerEncoder encoder(
        nn::TransformerEncoderOptions(
            nn::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64).dropout(0.2).batch_first(true).norm_first(norm_first), layers)
            .norm(nn::LayerNorm(32))
            .checkpoint_layers(mode == kLayers || mode == kNested)
            .checkpoint_blocks(mode == kBlocks || mode == kNested)
            .checkpoint_keep_attention(keep_attention));
    encoder->train();
    const Tensor src = random_nonzero({4, 64, 32}), padding = arange(64).reshape({1, 64}).ge(
                                                                   from_vector<int64_t>({64, 50, 33, 7}, {4, 1}));
    Run r;
    cpu::reset_peak_memory_stats();
    const size_t base = cpu::memory_allocated();
    const uint64_t runs_before = detail::fused_attention_forward_count();
    for (int step = 0; step < steps; ++step) {
      encoder->zero_grad();
      const Tensor loss = encoder(src, Tensor(), padding).pow(2.0).mean();
      loss.backward();
      r.losses.push_back(loss.item<double>());
    }
    r.peak = cpu::max_memory_allocated() - base;
    r.attention_runs = detail::fused_attention_forward_count() - runs_before;
    for (const Tensor& p : encoder->parameters()) r.grads.push_back(p.grad().clone());
    return r;
  };
  for (bool norm_first : {false, true}) {
    INFO((norm_first ? "pre-norm" : "post-norm"));
    const Run plain = run(kPlain, norm_first, false);
    CHECK(plain.attention_runs == uint64_t(layers * steps));
    size_t peaks[4][2] = {};
    for (Mode mode : {kLayers, kBlocks, kNested}) {
      for (bool keep_attention : {false, true}) {
        INFO(names[mode] << (keep_attention ? ", keep_attention" : ""));
        const Run r = run(mode, norm_first, keep_attention);
        peaks[mode][keep_attention] = r.peak;
        CHECK(r.losses == plain.losses);
        REQUIRE(r.grads.size() == plain.grads.size());
        for (size_t i = 0; i < r.grads.size(); ++i) {
          INFO("parameter " << i);
          CHECK(same_bits(r.grads[i], plain.grads[i]));
        }
        // Each attention runs in the forward, and again in each recomputation that reaches
        // it unless kept: nested, the layer's recomputation too (its twin serves the kept ones).
        const int64_t recomputations = keep_attention ? 0 : (mode == kNested ? 2 : 1);
        CHECK(r.attention_runs == uint64_t(layers * steps * (1 + recomputations)));
      }
    }
    std::printf("TransformerEncoder (%lld layers, (4, 64, 32), %s): peak %zu bytes; checkpoint_layers %zu, "
                "checkpoint_blocks %zu, both (nested) %zu; with keep_attention %zu, %zu, %zu\n",
                static_cast<long long>(layers), norm_first ? "pre-norm" : "post-norm", plain.peak, peaks[kLayers][0],
                peaks[kBlocks][0], peaks[kNested][0], peaks[kLayers][1], peaks[kBlocks][1], peaks[kNested][1]);
    CHECK(peaks[kLayers][0] < plain.peak);
    CHECK(peaks[kBlocks][0] < peaks[kLayers][0]);  // a block's activations at a time, for one more saved input a layer
    // Nested: a block's activations at a time, and one saved input a layer.
    for (bool keep : {false, true}) CHECK(peaks[kNested][keep] < peaks[kBlocks][keep]);
  }
}
