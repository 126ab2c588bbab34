// timeseries' model: a recurrent layer (LSTM or plain RNN) reads the window, the state after
// its last week goes through a linear layer to the `horizon` coming weeks. Shared with the
// tests that train it on a GPU.
#pragma once

#include <memory>
#include <string>

#include "loom.h"

namespace examples {

// CO2 rises steadily, so the test years lie above every value seen in training: the model
// works relative to the window's last value (it sees x - last and predicts the change from
// it), which makes it blind to the level.
struct Forecaster : loom::nn::Module {
  Forecaster(const std::string& cell, int64_t hidden, int64_t layers, int64_t horizon)
      : fc(register_module("fc", loom::nn::Linear(hidden, horizon))) {
    const auto options = loom::nn::RNNOptions(1, hidden).num_layers(layers).batch_first(true);
    if (cell == "lstm") rnn = register_module("rnn", loom::nn::LSTM(options).ptr());
    else if (cell == "rnn") rnn = register_module("rnn", loom::nn::RNN(options).ptr());
    else throw loom::ValueError("--cell must be rnn or lstm, got '" + cell + "'");
  }

  loom::Tensor forward(const loom::Tensor& x) {                     // (B, L, 1), normalized
    loom::Tensor last = x.select(1, x.size(1) - 1);                 // (B, 1)
    loom::Tensor out = rnn->forward(x - last.unsqueeze(1)).output;  // (B, L, hidden)
    return last + fc(out.select(1, x.size(1) - 1));                 // (B, horizon)
  }

  std::shared_ptr<loom::nn::RNNBaseImpl> rnn;
  loom::nn::Linear fc;
};

}  // namespace examples
