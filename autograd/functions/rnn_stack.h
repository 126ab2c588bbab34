// A stack of recurrent layers and directions (nn::RNN/LSTM/GRU's forward), with the one
// choice of how to run it: as a single node over the device's whole-stack kernel where it
// has one (cuDNN on a GPU: kernels::rnn_stack_supported) and the lengths are on the host,
// else as one whole-sequence node per layer and direction (autograd/functions/rnn_layer.h)
// with dropout between layers. Lengths left on a GPU (a CUDA-graph step's, whose inputs
// all live there) take the second way: cuDNN plans its packed layout from host lengths,
// while the layer kernels mask each step on the device (Note [recurrent layer rules]).
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

// lengths: undefined, or integers (B) on the CPU or on the input's device (x: (T, B, ·)),
// each in [1, T]: read and checked on the host where they live there, else converted and
// checked on the device, without a host sync (a bad length is raised as a ValueError by the
// next call that waits for the device: Note [deferred device checks]). `op` and
// `input_shape` (the module's input as given) name them in the error.
RNNLengths rnn_lengths(const Tensor& lengths, const Tensor& x, const char* op, const Shape& input_shape);

// x (T, B, I); h0, c0 (L·D, B, H); weights in PyTorch's flat order, per layer and
// direction w_ih, w_hh, b_ih, b_hh (undefined biases for bias=false); lengths from
// rnn_lengths, or empty. config.dropout is the module's (0 in eval mode); config.training
// is set here from whether any input needs a gradient.
RNNStackResult rnn_stack(kernels::RNNStackConfig config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const std::vector<Tensor>& weights, const RNNLengths& lengths);

// rnn_stack's path where the device has no whole-stack kernel: run_layer (rnn_layer, or the
// chunked one of autograd/functions/rnn_chunked.h) per layer and direction, dropout between.
using RNNLayerFn = std::function<decltype(rnn_layer)>;
RNNStackResult rnn_stack_by_layer(const RNNStackConfig& config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                                  const std::vector<Tensor>& weights, const RNNLengths& lengths,
                                  const RNNLayerFn& run_layer);

}  // namespace loom
