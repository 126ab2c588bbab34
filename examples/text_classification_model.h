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

  // tokens (B, T) int64 on the model's device; lengths (B) int64 on the CPU (as PyTorch's
  // pack_padded_sequence wants them) or on the model's device (a --cuda-graph step's, whose
  // inputs all live there): the LSTM runs over each text's own length either way.
  loom::Tensor forward(const loom::Tensor& tokens, const loom::Tensor& lengths) {
    loom::nn::RNNOutput out = lstm(embedding(tokens), loom::nn::RNNState{}, lengths);
    return fc(dropout(out.h_n[0]));  // the state at each text's last token: (B, hidden)
  }

  loom::nn::Embedding embedding;
  loom::nn::LSTM lstm;
  loom::nn::Dropout dropout;
  loom::nn::Linear fc;
};

}  // namespace examples
