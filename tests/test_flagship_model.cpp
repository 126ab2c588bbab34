// The flagship's model (examples/text_classification_model.h) has one forward: the LSTM runs
// over each text's own length, whether the lengths are on the CPU (eager steps, as PyTorch's
// pack_padded_sequence) or on the model's device (a --cuda-graph step's, whose inputs all live
// there). Checked against an independent reference — the padded batch's LSTM output at each
// text's last token, which is the same state since the padding comes after the text — and,
// on the host-emulated cuda:0 of builds without CUDA, the device-lengths path against the
// CPU's bit for bit, without a host sync.
#include "examples/text_classification_model.h"
#include "test_util.h"

#ifndef LOOM_WITH_CUDA
#include "core/cuda.h"
#include "core/cuda_emulation.h"
#endif

using namespace loom;

namespace {

// output (B, T, H), lengths (B) -> output[b, lengths[b] - 1, :]: (B, H).
Tensor last_outputs(const Tensor& output, const Tensor& lengths) {
  const int64_t b = output.size(0), h = output.size(2);
  const Tensor at = (lengths - 1).reshape({b, 1, 1}).expand({b, 1, h});  // (B, 1, H)
  return output.gather(1, at).squeeze(1);
}

struct Texts {
  Tensor tokens;   // (B, T), 0 past each length
  Tensor lengths;  // (B)
};

Texts random_texts(const std::vector<int64_t>& lengths, int64_t t, int64_t vocab) {
  const int64_t b = int64_t(lengths.size());
  Tensor tokens = randint(1, vocab, {b, t});
  for (int64_t i = 0; i < b; ++i)
    if (lengths[size_t(i)] < t) tokens.narrow(0, i, 1).narrow(1, lengths[size_t(i)], t - lengths[size_t(i)]).fill_(0);
  return {tokens, from_vector(lengths)};
}

}  // namespace

TEST_CASE("flagship model: the LSTM over each text's length equals the padded outputs at each last token, "
          "gradients too",
          "[examples]") {
  manual_seed(21);
  examples::SentimentLSTM model(40, 8, 12, 3, /*dropout=*/0.0);
  const Texts texts = random_texts({7, 2, 5, 1, 7}, 7, 40);

  const Tensor logits = model.forward(texts.tokens, texts.lengths);  // (B, classes)
  model.zero_grad();
  logits.pow(2).sum().backward();
  const Tensor grad_w_ih = model.lstm->parameters()[0].grad().clone();

  const Tensor padded = model.lstm(model.embedding(texts.tokens)).output;  // (B, T, H) over the padding too
  const Tensor reference = model.fc(last_outputs(padded, texts.lengths));
  model.zero_grad();
  reference.pow(2).sum().backward();
  const Tensor reference_grad_w_ih = model.lstm->parameters()[0].grad();

  REQUIRE(logits.abs().sum().item<double>() > 0);
  REQUIRE((reference - logits).abs().max().item<double>() < 1e-5);
  REQUIRE(grad_w_ih.abs().sum().item<double>() > 0);
  REQUIRE((reference_grad_w_ih - grad_w_ih).abs().max().item<double>() < 1e-5);
  // A wrong index is not silently equal: the output at the padded end differs for short texts.
  const Tensor padded_end = model.fc(padded.select(1, 6));
  REQUIRE((padded_end - logits).abs().max().item<double>() > 1e-3);
}

#ifndef LOOM_WITH_CUDA

TEST_CASE("flagship model: lengths on the device give the CPU lengths' numbers bit for bit, without a host sync",
          "[examples][cuda_emulation]") {
  // Plain, and with the LSTM recomputed in chunks of 3 steps (whose chunk-local lengths are
  // computed where the lengths live).
  for (int64_t every : {0, 3}) {
    INFO("checkpoint_every " << every);
    manual_seed(22);
    examples::SentimentLSTM cpu_model(40, 8, 12, 3, /*dropout=*/0.2, every);
    const Texts texts = random_texts({7, 2, 5, 1, 7, 3}, 7, 40);
    manual_seed(5);  // the dropout masks
    const Tensor cpu_logits = cpu_model.forward(texts.tokens, texts.lengths);
    cpu_logits.pow(2).sum().backward();

    cuda::EmulationGuard emulate;
    examples::SentimentLSTM model(40, 8, 12, 3, /*dropout=*/0.2, every);
    model.load_state_dict(cpu_model.state_dict());
    model.to(kCUDA);
    const Tensor tokens = texts.tokens.to(kCUDA), lengths = texts.lengths.to(kCUDA);
    manual_seed(5);
    const uint64_t syncs = cuda::host_sync_count();
    const Tensor logits = model.forward(tokens, lengths);
    logits.pow(2).sum().backward();
    CHECK(cuda::host_sync_count() == syncs);  // the lengths were never read on the host
    REQUIRE(logits.is_cuda());
    REQUIRE(test::bit_equal(logits.cpu(), cpu_logits));
    const nn::NamedTensors cpu_params = cpu_model.named_parameters(), params = model.named_parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      INFO(params[k].first);
      REQUIRE(cpu_params[k].second.grad().abs().sum().item<double>() > 0);
      REQUIRE(test::bit_equal(params[k].second.grad().cpu(), cpu_params[k].second.grad()));
    }
  }

  manual_seed(23);
  examples::SentimentLSTM cpu_model(40, 8, 12, 3, /*dropout=*/0.2);
  const Texts texts = random_texts({7, 2, 5, 1, 7, 3}, 7, 40);
  cuda::EmulationGuard emulate;
  examples::SentimentLSTM model(40, 8, 12, 3, /*dropout=*/0.2);
  model.to(kCUDA);
  const Tensor tokens = texts.tokens.to(kCUDA), lengths = texts.lengths.to(kCUDA);
  // Lengths on the device are checked there: a bad one is the CPU's ValueError (the
  // emulated device runs the CPU's check, so it is thrown at once); lengths on a device
  // other than the input's, a DeviceError.
  const Tensor bad = from_vector<int64_t>({7, 2, 0, 1, 7, 3}, {6}).to(kCUDA);
  test::require_throws_with<ValueError>([&] { (void)model.forward(tokens, bad); },
                                  {"LSTM: length 0 of sequence 2 is outside [1, 7] for an input of shape (6, 7, 8)"});
  REQUIRE_THROWS_AS(cpu_model.forward(texts.tokens, lengths), DeviceError);
}

#endif
