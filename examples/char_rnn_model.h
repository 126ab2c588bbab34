// char_rnn's model: Embedding -> stacked LSTM -> Linear over the vocabulary at every step,
// Karpathy's char-rnn as a PyTorch user writes it. Shared with the tests that train it on
// a GPU.
#pragma once

#include <utility>

#include "loom.h"

namespace examples {

struct CharLSTM : loom::nn::Module {
  CharLSTM(int64_t vocab, int64_t dim, int64_t hidden, int64_t layers)
      : embedding(register_module("embedding", loom::nn::Embedding(vocab, dim))),
        lstm(register_module(
            "lstm", loom::nn::LSTM(loom::nn::RNNOptions(dim, hidden).num_layers(layers).batch_first(true)))),
        fc(register_module("fc", loom::nn::Linear(hidden, vocab))) {}

  // ids (B, T) -> logits (B, T, vocab) and the LSTM's state after the last step, to carry
  // into the next call (an empty state starts from zeros).
  std::pair<loom::Tensor, loom::nn::RNNState> forward(const loom::Tensor& ids, const loom::nn::RNNState& state = {}) {
    loom::nn::RNNOutput out = lstm(embedding(ids), state);  // output (B, T, hidden)
    return {fc(out.output), {out.h_n, out.c_n}};
  }

  loom::nn::Embedding embedding;
  loom::nn::LSTM lstm;
  loom::nn::Linear fc;
};

}  // namespace examples
