// Recurrent layers: nn::RNN, nn::LSTM, nn::GRU (multi-layer, bidirectional, batch_first,
// dropout between layers, optional initial states, variable lengths) and the cells
// nn::RNNCell, nn::LSTMCell, nn::GRUCell, with PyTorch's semantics and parameter names.
//
//   nn::LSTM lstm(nn::RNNOptions(128, 256).num_layers(2).batch_first(true));
//   auto [output, h_n, c_n] = lstm(x);                  // x (B, T, 128)
//   auto out = lstm(x, nn::RNNState{}, lengths);       // packed-sequence semantics
//   auto [y, h_n, unused] = gru(x, h0);               // as PyTorch's gru(x, h0)
#pragma once

#include <string>
#include <vector>

#include "autograd/functions/rnn_stack.h"
#include "nn/module.h"

namespace loom::nn {

struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  RNNOptions& num_layers(int64_t n) { num_layers_ = n; return *this; }
  RNNOptions& bias(bool b) { bias_ = b; return *this; }
  RNNOptions& batch_first(bool b) { batch_first_ = b; return *this; }
  RNNOptions& dropout(double p) { dropout_ = p; return *this; }
  RNNOptions& bidirectional(bool b) { bidirectional_ = b; return *this; }
  // RNN only: "tanh" or "relu".
  RNNOptions& nonlinearity(std::string n) { nonlinearity_ = std::move(n); return *this; }
  // Recompute activations in backward in chunks of k time steps (0: off; Note [chunked
  // recurrent layers] in autograd/functions/rnn_chunked.cpp): less memory, more compute.
  RNNOptions& checkpoint_every(int64_t k) { checkpoint_every_ = k; return *this; }
  int64_t input_size_, hidden_size_;
  int64_t num_layers_ = 1;
  bool bias_ = true, batch_first_ = false;
  double dropout_ = 0.0;
  bool bidirectional_ = false;
  std::string nonlinearity_ = "tanh";
  int64_t checkpoint_every_ = 0;
};

// Initial or final states: h (and c for LSTM) of shape (num_layers · directions, B, H).
struct RNNState {
  Tensor h;
  Tensor c;
};

struct RNNOutput {
  Tensor output;  // (T, B, D·H), or (B, T, D·H) with batch_first; zero past each length
  Tensor h_n;     // (num_layers · D, B, H)
  Tensor c_n;     // LSTM only
};

class RNNBaseImpl : public Module {
 public:
  RNNBaseImpl(RNNMode mode, const RNNOptions& options, const char* type_name);
  // input (T, B, I) or (B, T, I); lengths: integers (B), each in [1, T], on the CPU (as
  // PyTorch's pack_padded_sequence takes them) or on the input's device, where the host
  // never reads them: what a CUDA-graph step passes (its inputs all live on the GPU). A bad
  // length there is raised by the next call that waits for the GPU.
  RNNOutput forward(const Tensor& input, const RNNState& state = {}, const Tensor& lengths = Tensor());
  // PyTorch's rnn(x, h0) / gru(x, h0): the second tensor is the initial hidden state.
  RNNOutput forward(const Tensor& input, const Tensor& h0) { return forward(input, RNNState{h0, {}}, Tensor()); }
  void reset_parameters();
  std::string extra_repr() const override;
  // The flat list in PyTorch's order: per layer and direction w_ih, w_hh, b_ih, b_hh.
  std::vector<Tensor> flat_weights() const { return flat_weights_; }

  RNNOptions options;

 private:
  RNNMode mode_;
  std::vector<Tensor> flat_weights_;
};

class RNNImpl : public RNNBaseImpl {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& options);
};
class LSTMImpl : public RNNBaseImpl {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size) : LSTMImpl(RNNOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const RNNOptions& options) : RNNBaseImpl(RNNMode::LSTM, options, "LSTM") {}
};
class GRUImpl : public RNNBaseImpl {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(RNNOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const RNNOptions& options) : RNNBaseImpl(RNNMode::GRU, options, "GRU") {}
};
using RNN = ModuleHolder<RNNImpl>;
using LSTM = ModuleHolder<LSTMImpl>;
using GRU = ModuleHolder<GRUImpl>;

// Single-step cells: x (B, I), state (B, H) -> new state. Parameters weight_ih, weight_hh,
// bias_ih, bias_hh.
class RNNCellBaseImpl : public Module {
 public:
  RNNCellBaseImpl(RNNMode mode, int64_t input_size, int64_t hidden_size, bool bias, const char* type_name);
  // Returns h' (and c' for LSTMCell); h/c default to zeros.
  RNNState forward(const Tensor& x, const RNNState& state = {});
  std::string extra_repr() const override;
  int64_t input_size, hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 private:
  RNNMode mode_;
};

class RNNCellImpl : public RNNCellBaseImpl {
 public:
  RNNCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh");
  Tensor forward(const Tensor& x, const Tensor& h = Tensor()) { return RNNCellBaseImpl::forward(x, {h, {}}).h; }
};
class LSTMCellImpl : public RNNCellBaseImpl {
 public:
  LSTMCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true)
      : RNNCellBaseImpl(RNNMode::LSTM, input_size, hidden_size, bias, "LSTMCell") {}
};
class GRUCellImpl : public RNNCellBaseImpl {
 public:
  GRUCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true)
      : RNNCellBaseImpl(RNNMode::GRU, input_size, hidden_size, bias, "GRUCell") {}
  Tensor forward(const Tensor& x, const Tensor& h = Tensor()) { return RNNCellBaseImpl::forward(x, {h, {}}).h; }
};
using RNNCell = ModuleHolder<RNNCellImpl>;
using LSTMCell = ModuleHolder<LSTMCellImpl>;
using GRUCell = ModuleHolder<GRUCellImpl>;

// Pads a list of (L_i, *) sequences to (L_max, N, *) (or (N, L_max, *) with batch_first).
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);

}  // namespace loom::nn
