// One recurrent layer in one direction over a whole sequence, as a single autograd node
// (Note [whole-sequence RNN kernels] in kernels/cpu/rnn.cpp). nn::RNN/LSTM/GRU stack
// these per layer and direction.
#pragma once

#include <vector>

#include "kernels/kernels.h"

namespace loom {

struct RNNLayerResult {
  Tensor y;    // (T, B, H)
  Tensor h_n;  // (B, H)
  Tensor c_n;  // (B, H), LSTM only
};

// "LSTMBackward", "GRUBackward" or "RNNBackward": the node name of a recurrent op.
const char* rnn_backward_name(kernels::RNNMode mode);

// x (T, B, I), h0/c0 (B, H), weights (G·H, I) and (G·H, H), biases (G·H) or undefined.
// lengths: per batch row (packed-sequence semantics), or empty.
RNNLayerResult rnn_layer(kernels::RNNMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                         const std::vector<int64_t>& lengths, bool reverse);

}  // namespace loom
