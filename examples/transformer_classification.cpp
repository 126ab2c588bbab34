// A Transformer text classifier on the bundled movie-review sentences, beside the LSTM
// flagship (text_classification): Embedding + learned positions -> TransformerEncoder
// (pre-norm, padding masks from the lengths) -> mean over each text's own tokens -> Linear,
// as a PyTorch script builds it from nn.TransformerEncoder.
//
//   ./build/cpu/examples/transformer_classification [--epochs 10] [--layers 2] [--d-model 64]
#include <cmath>

#include "loom.h"
#include "text_classifier_program.h"

using namespace loom;

struct TransformerClassifier : nn::Module {
  TransformerClassifier(int64_t vocab, int64_t d_model, int64_t heads, int64_t layers, int64_t feedforward,
                        int64_t classes, double dropout)
      : embedding(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(vocab, d_model).padding_idx(0)))),
        positions(register_module("positions", nn::PositionalEncoding(d_model, kMaxPositions, /*learned=*/true, dropout))),
        encoder(register_module("encoder", nn::TransformerEncoder(nn::TransformerEncoderLayerOptions(d_model, heads)
                                                                      .dim_feedforward(feedforward)
                                                                      .dropout(dropout)
                                                                      .batch_first(true)
                                                                      .norm_first(true),
                                                                  layers, nn::LayerNorm(d_model)))),
        fc(register_module("fc", nn::Linear(d_model, classes))) {}

  Tensor forward(const Tensor& tokens, const Tensor& lengths_in) {  // (B, T) int64, (B) on the CPU
    const int64_t b = tokens.size(0), t = tokens.size(1);
    const Tensor lengths = lengths_in.to(tokens.device());
    const Tensor padding = arange(t).to(tokens.device()).reshape({1, t}).ge(lengths.reshape({b, 1}));  // (B, T)
    Tensor h = encoder(positions(embedding(tokens)), Tensor(), padding);                              // (B, T, d)
    const Tensor valid = padding.logical_not().unsqueeze(2).to(h.dtype());                            // (B, T, 1)
    return fc((h * valid).sum(1) / lengths.unsqueeze(1).to(h.dtype()));                              // (B, classes)
  }

  static constexpr int64_t kMaxPositions = 512;
  nn::Embedding embedding;
  nn::PositionalEncoding positions;
  nn::TransformerEncoder encoder;
  nn::Linear fc;
};

int main(int argc, char** argv) {
  int64_t d_model = 64, heads = 4, layers = 2, feedforward = 128;
  double dropout = 0.1;
  return examples::run_text_classifier(
      argc, argv,
      {.name = "transformer_classification", .description = "Train a Transformer-encoder text classifier",
       .epochs = 6, .batch_size = 32, .lr = 2e-3, .clip_norm = 1.0},
      [&](CLI::App& app) {
        app.add_option("--d-model", d_model, "embedding and model width");
        app.add_option("--heads", heads, "attention heads");
        app.add_option("--layers", layers, "encoder layers");
        app.add_option("--feedforward", feedforward, "width of each layer's feed-forward block");
        app.add_option("--dropout", dropout);
      },
      [&](int64_t vocab, int64_t classes) {
        return std::make_shared<TransformerClassifier>(vocab, d_model, heads, layers, feedforward, classes, dropout);
      });
}
