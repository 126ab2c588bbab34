// A stack of recurrent layers run over time in chunks of k steps, each chunk of each layer
// and direction an activation checkpoint (Note [chunked recurrent layers] in rnn_chunked.cpp):
// nn::RNNOptions::checkpoint_every(k). The results and gradients are rnn_stack's.
#pragma once

#include <vector>

#include "autograd/functions/rnn_stack.h"

namespace loom {

// As rnn_stack (autograd/functions/rnn_stack.h), with each layer and direction run in chunks of
// `every` time steps whose activations (the gates and saved states) are recomputed in backward.
// every == 0, every >= T, or no gradient wanted: just rnn_stack. every < 0: ValueError.
RNNStackResult rnn_stack_chunked(const RNNStackConfig& config, int64_t every, const Tensor& x, const Tensor& h0,
                                 const Tensor& c0, const std::vector<Tensor>& weights, const RNNLengths& lengths);

}  // namespace loom
