// nn::RNN/LSTM/GRU on a GPU as one autograd node over cuDNN's whole-stack RNN calls
// (kernels/cuda/cudnn_rnn.h). Only in builds with cuDNN (LOOM_WITH_CUDNN).
#pragma once

#include <vector>

#include "kernels/cuda/cudnn_rnn.h"

namespace loom {

struct RNNStackResult {
  Tensor y;    // (T, B, D·H)
  Tensor h_n;  // (L·D, B, H)
  Tensor c_n;  // LSTM only
};

// x (T, B, I); h0, c0 (L·D, B, H); weights in PyTorch's flat order (undefined biases for
// bias=false); lengths per batch row or empty. config.training is set here from whether
// any input needs a gradient.
RNNStackResult cudnn_rnn(kernels::cuda::CudnnRNNConfig config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths);

}  // namespace loom
