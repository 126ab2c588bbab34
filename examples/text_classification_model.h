// The flagship's model (text_classification): Embedding -> LSTM over each text's own length
// -> dropout -> Linear, as a PyTorch script defines it in its model.py. Shared with the
// tests that train it on a GPU.
#pragma once

#include "loom.h"

namespace examples {

struct SentimentLSTM : loom::nn::Module {
  // checkpoint_every: the LSTM recomputes its activations in backward in chunks of that
  // many steps (nn::RNNOptions::checkpoint_every; 0: off).
  SentimentLSTM(int64_t vocab, int64_t dim, int64_t hidden, int64_t classes, double dropout,
                int64_t checkpoint_every = 0)
      : embedding(register_module("embedding",
                                  loom::nn::Embedding(loom::nn::EmbeddingOptions(vocab, dim).padding_idx(0)))),
        lstm(register_module("lstm", loom::nn::LSTM(loom::nn::RNNOptions(dim, hidden).batch_first(true)
                                                        .checkpoint_every(checkpoint_every)))),
        dropout(register_module("dropout", loom::nn::Dropout(dropout))),
        fc(register_module("fc", loom::nn::Linear(hidden, classes))) {}

  // tokens (B, T) int64 on the model's device; lengths (B) int64. On the CPU, as the LSTM
  // (like PyTorch's pack_padded_sequence) wants them, it runs over each text's own length.
  // On the GPU — a --cuda-graph step, whose inputs all live there, since a graph cannot
  // take host values that change per batch — it runs over the padded batch and takes the
  // output at each text's last token: the same state, as the padding comes after the text.
  loom::Tensor forward(const loom::Tensor& tokens, const loom::Tensor& lengths) {
    if (lengths.is_cpu()) {
      loom::nn::RNNOutput out = lstm(embedding(tokens), loom::nn::RNNState{}, lengths);
      return fc(dropout(out.h_n[0]));  // the state at each text's last token: (B, hidden)
    }
    return fc(dropout(last_outputs(lstm(embedding(tokens)).output, lengths)));
  }

  // output (B, T, H), lengths (B) on its device -> output[b, lengths[b] - 1, :]: (B, H).
  static loom::Tensor last_outputs(const loom::Tensor& output, const loom::Tensor& lengths) {
    const int64_t b = output.size(0), h = output.size(2);
    const loom::Tensor at = (lengths - 1).reshape({b, 1, 1}).expand({b, 1, h});  // (B, 1, H)
    return output.gather(1, at).squeeze(1);
  }

  loom::nn::Embedding embedding;
  loom::nn::LSTM lstm;
  loom::nn::Dropout dropout;
  loom::nn::Linear fc;
};

}  // namespace examples
