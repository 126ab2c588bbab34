// A stack of recurrent layers and directions (nn::RNN/LSTM/GRU's forward), with the one
// choice of how to run it: as a single node over the device's whole-stack kernel where it
// has one (cuDNN on a GPU: kernels::rnn_stack_supported), else as one whole-sequence node
// per layer and direction (autograd/functions/rnn_layer.h) with dropout between layers.
#pragma once

#include <functional>
#include <vector>

#include "autograd/functions/rnn_layer.h"
#include "kernels/kernels.h"

namespace loom {

// The recurrent layers' kinds and stack description, as nn::RNN, LSTM and GRU name them.
using kernels::RNNMode;
using kernels::RNNStackConfig;
using kernels::rnn_gates;

struct RNNStackResult {
  Tensor y;    // (T, B, D·H)
  Tensor h_n;  // (L·D, B, H)
  Tensor c_n;  // LSTM only
};

// x (T, B, I); h0, c0 (L·D, B, H); weights in PyTorch's flat order, per layer and
// direction w_ih, w_hh, b_ih, b_hh (undefined biases for bias=false); lengths per batch
// row or empty. config.dropout is the module's (0 in eval mode); config.training is set
// here from whether any input needs a gradient.
RNNStackResult rnn_stack(kernels::RNNStackConfig config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths);

// rnn_stack's path where the device has no whole-stack kernel: run_layer (rnn_layer, or the
// chunked one of autograd/functions/rnn_chunked.h) per layer and direction, dropout between.
using RNNLayerFn = std::function<decltype(rnn_layer)>;
RNNStackResult rnn_stack_by_layer(const RNNStackConfig& config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                                  const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths,
                                  const RNNLayerFn& run_layer);

}  // namespace loom
