// The Transformer encoder, as torch.nn.TransformerEncoderLayer and TransformerEncoder,
// with PyTorch's options, defaults, parameter names and initialisation; and the helpers a
// Transformer classifier needs: the causal mask, sinusoidal and learned positions.
//
//   nn::TransformerEncoder encoder(
//       nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).batch_first(true), /*num_layers=*/2);
//   Tensor h = encoder(x, Tensor(), padding);      // x (N, T, 64), padding (N, T) bool: true = pad
//
// Layer (post-norm, PyTorch's default):  x = norm1(x + sa(x)); x = norm2(x + ff(x))
// Layer with norm_first:                 x = x + sa(norm1(x)); x = x + ff(norm2(x))
// where sa is self-attention (nn::MultiheadAttention, need_weights false) with dropout1 and
// ff is linear2(dropout(activation(linear1(x)))) with dropout2. The encoder's layers start
// as copies of one layer (equal weights, as PyTorch's deepcopy), then an optional norm.
#pragma once

#include <string>
#include <vector>

#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/module_list.h"
#include "nn/multihead_attention.h"

namespace loom::nn {

struct TransformerEncoderLayerOptions {
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  TransformerEncoderLayerOptions& dim_feedforward(int64_t d) { dim_feedforward_ = d; return *this; }
  TransformerEncoderLayerOptions& dropout(double p) { dropout_ = p; return *this; }
  TransformerEncoderLayerOptions& activation(std::string a) { activation_ = std::move(a); return *this; }
  TransformerEncoderLayerOptions& layer_norm_eps(double e) { layer_norm_eps_ = e; return *this; }
  TransformerEncoderLayerOptions& batch_first(bool b) { batch_first_ = b; return *this; }
  TransformerEncoderLayerOptions& norm_first(bool b) { norm_first_ = b; return *this; }
  TransformerEncoderLayerOptions& bias(bool b) { bias_ = b; return *this; }
  int64_t d_model_, nhead_;
  int64_t dim_feedforward_ = 2048;
  double dropout_ = 0.1;
  std::string activation_ = "relu";  // or "gelu"
  double layer_norm_eps_ = 1e-5;
  bool batch_first_ = false;
  bool norm_first_ = false;
  bool bias_ = true;
};

class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  // src (T, N, d_model), (N, T, d_model) with batch_first, or (T, d_model); src_mask and
  // src_key_padding_mask as nn::MultiheadAttention's attn_mask and key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(), const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);
  // The layer's two residual blocks: forward(src) is feed_forward_block(self_attention_block(src)).
  // Pre-norm: src + sa(norm1(src)) and x + ff(norm2(x)); post-norm: norm1(src + sa(src)) and
  // norm2(x + ff(x)). (TransformerEncoderOptions::checkpoint_blocks checkpoints each.)
  Tensor self_attention_block(const Tensor& src, const Tensor& src_mask = Tensor(),
                              const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor feed_forward_block(const Tensor& x);

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn;
  Linear linear1, linear2;
  LayerNorm norm1, norm2;

 private:
  Tensor feed_forward(const Tensor& x);
};
using TransformerEncoderLayer = ModuleHolder<TransformerEncoderLayerImpl>;

struct TransformerEncoderOptions {
  TransformerEncoderOptions(TransformerEncoderLayerOptions layer, int64_t num_layers)
      : layer_(std::move(layer)), num_layers_(num_layers) {}
  TransformerEncoderOptions& norm(LayerNorm n) { norm_ = std::move(n); return *this; }
  // Each layer's activations recomputed in backward instead of kept (loom::checkpoint,
  // autograd/activation_checkpoint.h): about one more forward per step, for a backward
  // that holds one layer's activations at a time.
  TransformerEncoderOptions& checkpoint_layers(bool c) { checkpoint_layers_ = c; return *this; }
  // Finer: each layer's two residual blocks (self-attention, feed-forward) checkpointed as
  // two segments. The same recomputation; backward holds one block's activations at a time,
  // for one more saved (N, T, d_model) tensor per layer (the feed-forward block's input).
  // With checkpoint_layers too, the blocks' checkpoints nest in each layer's (Note [nested
  // recomputation] in autograd/activation_checkpoint.h): only the layer's input is kept
  // through the forward, and backward recomputes the layer up to the feed-forward block's
  // input (with checkpoint_keep_attention, without running the attention), then each block.
  TransformerEncoderOptions& checkpoint_blocks(bool c) { checkpoint_blocks_ = c; return *this; }
  // With either: keep each layer's attention output and log-sum-exp from the forward instead
  // of running the attention again (CheckpointOptions::keep_attention): 1 + 1/Ev floats a
  // token and model width kept a layer, for most of the recomputation's time at long sequences.
  TransformerEncoderOptions& checkpoint_keep_attention(bool k) { checkpoint_keep_attention_ = k; return *this; }
  TransformerEncoderLayerOptions layer_;
  int64_t num_layers_;
  LayerNorm norm_ = nullptr;
  bool checkpoint_layers_ = false;
  bool checkpoint_blocks_ = false;
  bool checkpoint_keep_attention_ = false;
};

class TransformerEncoderImpl : public Module {
 public:
  // num_layers copies of a layer made with `layer_options` (all with the same initial
  // weights), then `norm` if given.
  TransformerEncoderImpl(const TransformerEncoderLayerOptions& layer_options, int64_t num_layers,
                         LayerNorm norm = nullptr);
  explicit TransformerEncoderImpl(const TransformerEncoderOptions& options);
  Tensor forward(const Tensor& src, const Tensor& mask = Tensor(), const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);

  ModuleList layers;
  LayerNorm norm;  // empty without a final norm

 private:
  std::vector<TransformerEncoderLayer> stack_;  // layers' modules, typed, in order
  bool checkpoint_layers_ = false, checkpoint_blocks_ = false, checkpoint_keep_attention_ = false;
};
using TransformerEncoder = ModuleHolder<TransformerEncoderImpl>;

// (size, size) float: 0 on and below the diagonal, -inf above it (may not attend to later
// positions), as nn.Transformer.generate_square_subsequent_mask.
Tensor generate_square_subsequent_mask(int64_t size, TensorOptions options = kFloat32);

// (max_len, d_model): sin(pos / 10000^(2i/d)) in the even columns and cos(...) in the odd
// ones, the encoding of "Attention Is All You Need" (and PyTorch's tutorial).
Tensor sinusoidal_positional_encoding(int64_t max_len, int64_t d_model, TensorOptions options = kFloat32);

// x + positions, for x (N, T, d_model) (batch first): fixed sinusoidal positions (a buffer
// "pe") or learned ones (an Embedding "embedding" of max_len positions), then dropout.
class PositionalEncodingImpl : public Module {
 public:
  PositionalEncodingImpl(int64_t d_model, int64_t max_len, bool learned = false, double dropout = 0.0);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;

  int64_t d_model, max_len;
  bool learned;
  double dropout;
  Tensor pe;                    // (max_len, d_model), sinusoidal
  Embedding embedding{nullptr};  // learned: max_len positions of d_model
};
using PositionalEncoding = ModuleHolder<PositionalEncodingImpl>;

}  // namespace loom::nn
