// One recurrent layer in one direction over a whole sequence, as a single autograd node
// (Note [whole-sequence RNN kernels] in kernels/cpu/rnn.cpp). nn::RNN/LSTM/GRU stack
// these per layer and direction.
#pragma once

#include <vector>

#include "kernels/kernels.h"

namespace loom {

// The lengths of a batch's rows (packed-sequence semantics): on the host, or on the
// input's device where the host never reads them (a CUDA-graph step's), or neither (every
// row runs all T steps).
struct RNNLengths {
  std::vector<int64_t> host;  // (B), or empty
  Tensor device;              // int64 (B) contiguous on the input's device, or undefined
  RNNLengths() = default;
  RNNLengths(std::vector<int64_t> on_host) : host(std::move(on_host)) {}  // NOLINT: a vector is host lengths
  static RNNLengths on_device(Tensor lengths) {
    RNNLengths l;
    l.device = std::move(lengths);
    return l;
  }
  bool empty() const { return host.empty() && !device.defined(); }
};

struct RNNLayerResult {
  Tensor y;    // (T, B, H)
  Tensor h_n;  // (B, H)
  Tensor c_n;  // (B, H), LSTM only
};

// "LSTMBackward", "GRUBackward" or "RNNBackward": the node name of a recurrent op.
const char* rnn_backward_name(kernels::RNNMode mode);

// x (T, B, I), h0/c0 (B, H), weights (G·H, I) and (G·H, H), biases (G·H) or undefined.
RNNLayerResult rnn_layer(kernels::RNNMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                         const RNNLengths& lengths, bool reverse);

}  // namespace loom
