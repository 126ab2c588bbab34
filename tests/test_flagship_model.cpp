// The flagship's model (examples/text_classification_model.h) takes each text's last LSTM
// state two ways: packed over each text's own length (lengths on the CPU, as PyTorch's
// pack_padded_sequence) for eager runs, and gathered from the padded batch's outputs
// (lengths on the GPU) for --cuda-graph runs, whose inputs all live on the device. Both
// must give the same state and the same gradients.
#include "examples/text_classification_model.h"
#include "test_util.h"

using namespace loom;

TEST_CASE("flagship model: the gathered last outputs equal the packed LSTM's state, gradients too", "[examples]") {
  manual_seed(21);
  examples::SentimentLSTM model(40, 8, 12, 3, /*dropout=*/0.0);
  const std::vector<int64_t> lengths_list = {7, 2, 5, 1, 7};  // padded with 0 beyond each length
  const int64_t b = int64_t(lengths_list.size()), t = 7;
  Tensor tokens = randint(1, 40, {b, t});
  for (int64_t i = 0; i < b; ++i)
    if (lengths_list[size_t(i)] < t) tokens.narrow(0, i, 1).narrow(1, lengths_list[size_t(i)], t - lengths_list[size_t(i)]).fill_(0);
  const Tensor lengths = from_vector(lengths_list);

  const Tensor packed = model.forward(tokens, lengths);  // (B, classes)
  const Tensor packed_grad_weights = [&] {
    model.zero_grad();
    packed.pow(2).sum().backward();
    return model.lstm->parameters()[0].grad().clone();
  }();
  const Tensor gathered = model.fc(examples::SentimentLSTM::last_outputs(
      model.lstm(model.embedding(tokens)).output, lengths));  // what the GPU path computes
  model.zero_grad();
  gathered.pow(2).sum().backward();
  const Tensor gathered_grad_weights = model.lstm->parameters()[0].grad();

  REQUIRE(packed.abs().sum().item<double>() > 0);
  REQUIRE((gathered - packed).abs().max().item<double>() < 1e-5);
  REQUIRE(packed_grad_weights.abs().sum().item<double>() > 0);
  REQUIRE((gathered_grad_weights - packed_grad_weights).abs().max().item<double>() < 1e-5);
  // A wrong index is not silently equal: the output at the padded end differs for short texts.
  const Tensor padded_end = model.fc(model.lstm(model.embedding(tokens)).output.select(1, t - 1));
  REQUIRE((padded_end - packed).abs().max().item<double>() > 1e-3);
}
