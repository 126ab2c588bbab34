// transformer_classification's model: Embedding + learned positions -> TransformerEncoder
// (pre-norm, padding masks from the lengths) -> mean over each text's own tokens -> Linear,
// as a PyTorch script builds it from nn.TransformerEncoder. Shared with the tests that
// train it on a GPU.
#pragma once

#include "loom.h"

namespace examples {

struct TransformerClassifier : loom::nn::Module {
  static constexpr int64_t kMaxPositions = 512;
  // checkpoint_blocks: each layer's two blocks checkpointed apart; keep_attention: the
  // attention's outputs kept through the checkpoint (TransformerEncoderOptions);
  // max_positions: the longest sequence the learned positions cover.
  TransformerClassifier(int64_t vocab, int64_t d_model, int64_t heads, int64_t layers, int64_t feedforward,
                        int64_t classes, double dropout, bool checkpoint_layers = false, bool checkpoint_blocks = false,
                        int64_t max_positions = kMaxPositions, bool keep_attention = false)
      : embedding(register_module("embedding",
                                  loom::nn::Embedding(loom::nn::EmbeddingOptions(vocab, d_model).padding_idx(0)))),
        positions(register_module("positions",
                                  loom::nn::PositionalEncoding(d_model, max_positions, /*learned=*/true, dropout))),
        encoder(register_module("encoder",
                                loom::nn::TransformerEncoder(
                                    loom::nn::TransformerEncoderOptions(loom::nn::TransformerEncoderLayerOptions(d_model, heads)
                                                                            .dim_feedforward(feedforward)
                                                                            .dropout(dropout)
                                                                            .batch_first(true)
                                                                            .norm_first(true),
                                                                        layers)
                                        .norm(loom::nn::LayerNorm(d_model))
                                        .checkpoint_layers(checkpoint_layers)
                                        .checkpoint_blocks(checkpoint_blocks)
                                        .checkpoint_keep_attention(keep_attention)))),
        fc(register_module("fc", loom::nn::Linear(d_model, classes))) {}

  // tokens (B, T) int64 on the model's device; lengths (B) int64, anywhere: from pinned
  // memory (a DataLoader's pinned batch) they reach a GPU without the host waiting.
  loom::Tensor forward(const loom::Tensor& tokens, const loom::Tensor& lengths_in) {
    using namespace loom;
    const int64_t b = tokens.size(0), t = tokens.size(1);
    const Device device = tokens.device();
    const Tensor lengths = lengths_in.to(device, /*non_blocking=*/true);
    const Tensor padding = arange(t, TensorOptions(kInt64).device(device)).reshape({1, t}).ge(lengths.reshape({b, 1}));
    // The embedding's output is a temporary of its own statement: not held through the encoder.
    const Tensor x = positions(embedding(tokens));                             // (B, T, d)
    Tensor h = encoder(x, Tensor(), padding);                                  // (B, T, d); padding (B, T)
    const Tensor valid = padding.logical_not().unsqueeze(2).to(h.dtype());     // (B, T, 1)
    return fc((h * valid).sum(1) / lengths.unsqueeze(1).to(h.dtype()));       // (B, classes)
  }

  loom::nn::Embedding embedding;
  loom::nn::PositionalEncoding positions;
  loom::nn::TransformerEncoder encoder;
  loom::nn::Linear fc;
};

}  // namespace examples
