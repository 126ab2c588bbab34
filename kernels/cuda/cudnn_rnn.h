// nn::RNN / LSTM / GRU on a GPU through cuDNN's RNN API (cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8): the whole stack of layers and
// directions in one call. Plain C++ declarations (no cuDNN types), defined in
// kernels/cuda/cudnn_rnn.cpp when Loom is built with cuDNN (LOOM_WITH_CUDNN).
//
// Note [cuDNN weight packing]
// cuDNN keeps every weight and bias in one flat "weight space" whose layout it chooses;
// cudnnGetRNNWeightParams gives the address of each (pseudo-layer, gate matrix). Loom's
// parameters stay PyTorch's separate tensors (w_ih (G·H, I): gate g is rows g·H..g·H+H,
// in PyTorch's gate order, which is cuDNN's: LSTM i f g o, GRU r z n). Each forward
// copies them into a fresh weight space (device-to-device, one copy per contiguous run),
// which backward keeps, and backward copies the weight-gradient space back out into one
// gradient per parameter through the same map. The copies are small next to the
// recurrence (the weights are read T times by it).
#pragma once

#include <memory>
#include <vector>

#include "kernels/kernels.h"

namespace loom::kernels::cuda {

struct CudnnRNNConfig {
  RNNMode mode;
  int64_t input_size, hidden_size, num_layers;
  bool bidirectional = false;
  double dropout = 0.0;    // between layers (cuDNN's own generator); 0 in eval mode
  bool training = false;   // forward for backward: keeps the reserve space
};

// What forward keeps for backward: descriptors, the packed weights, the reserve space.
struct CudnnRNNSaved;

struct CudnnRNNOutput {
  Tensor y;   // (T, B, D·H), zero past each length
  Tensor hy;  // (L·D, B, H)
  Tensor cy;  // (L·D, B, H), LSTM only
  std::shared_ptr<CudnnRNNSaved> saved;  // training only
};

struct CudnnRNNGrads {
  Tensor dx, dhx, dcx;
  std::vector<Tensor> dweights;  // one per weight given to forward (undefined for undefined ones)
};

// True when cuDNN is linked and runs this dtype (float32, float64, float16).
bool cudnn_rnn_supports(DType dtype);

// x (T, B, I) contiguous; hx, cx (L·D, B, H); weights: PyTorch's flat list, per layer and
// direction w_ih, w_hh, b_ih, b_hh (the biases undefined without bias); lengths per batch
// row in [1, T], or empty. All on one GPU, one dtype.
CudnnRNNOutput cudnn_rnn_forward(const CudnnRNNConfig& config, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths);

// dy (T, B, D·H), dhy, dcy (L·D, B, H), each possibly undefined (zero). x, hx, cx and y
// are forward's.
CudnnRNNGrads cudnn_rnn_backward(const CudnnRNNSaved& saved, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const Tensor& y, const Tensor& dy, const Tensor& dhy, const Tensor& dcy);

}  // namespace loom::kernels::cuda
