// A small language model shared by the checkpoint tests (tests/test_checkpoint.cpp) and
// the PyTorch interop driver (interop_driver.cpp, mirrored in torch_interop.py):
// Embedding -> Dropout -> 2-layer LSTM (batch_first, dropout between the layers) -> Linear.
// Its state_dict keys are PyTorch's for the same torch.nn modules: embedding.weight,
// lstm.weight_ih_l0 (..._reverse when bidirectional), fc.weight, ...
#pragma once

#include "nn/activation.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace loom::test {

struct TinyLMOptions {
  int64_t vocab, embed, hidden;
  bool bidirectional = false;
  double dropout = 0.2;       // after the embedding
  double lstm_dropout = 0.1;  // between the LSTM layers
};

struct TinyLM : nn::Module {
  explicit TinyLM(const TinyLMOptions& o)
      : embedding(register_module("embedding", nn::Embedding(o.vocab, o.embed))),
        dropout(register_module("dropout", nn::Dropout(o.dropout))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(o.embed, o.hidden)
                                                  .num_layers(2)
                                                  .bidirectional(o.bidirectional)
                                                  .batch_first(true)
                                                  .dropout(o.lstm_dropout)))),
        fc(register_module("fc", nn::Linear(o.hidden * (o.bidirectional ? 2 : 1), o.vocab))) {}
  Tensor forward(const Tensor& tokens) {  // (B, T) -> (B, T, V)
    return fc(lstm(dropout(embedding(tokens))).output);
  }
  nn::Embedding embedding;
  nn::Dropout dropout;
  nn::LSTM lstm;
  nn::Linear fc;
};

}  // namespace loom::test
