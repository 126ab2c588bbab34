#include "nn/transformer.h"

#include <cmath>
#include <limits>

#include "autograd/activation_checkpoint.h"
#include "core/factories.h"
#include "core/ops.h"

namespace loom::nn {

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& o)
    : Module("TransformerEncoderLayer"), options(o) {
  LOOM_CHECK(o.activation_ == "relu" || o.activation_ == "gelu", ValueError,
             "TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"", o.activation_, "\"");
  LOOM_CHECK(o.dim_feedforward_ > 0, ValueError, "TransformerEncoderLayer: dim_feedforward must be positive, got ",
             o.dim_feedforward_);
  LOOM_CHECK(o.dropout_ >= 0 && o.dropout_ < 1, ValueError, "TransformerEncoderLayer: dropout must be in [0, 1), got ",
             o.dropout_);
  // PyTorch's registration order, so that state_dict() lists the keys as PyTorch's does.
  self_attn = register_module("self_attn", MultiheadAttention(MultiheadAttentionOptions(o.d_model_, o.nhead_)
                                                                  .dropout(o.dropout_)
                                                                  .bias(o.bias_)
                                                                  .batch_first(o.batch_first_)));
  linear1 = register_module("linear1", Linear(LinearOptions(o.d_model_, o.dim_feedforward_).bias(o.bias_)));
  linear2 = register_module("linear2", Linear(LinearOptions(o.dim_feedforward_, o.d_model_).bias(o.bias_)));
  const LayerNormOptions norm = LayerNormOptions(Shape{o.d_model_}).eps(o.layer_norm_eps_).bias(o.bias_);
  norm1 = register_module("norm1", LayerNorm(norm));
  norm2 = register_module("norm2", LayerNorm(norm));
}

Tensor TransformerEncoderLayerImpl::feed_forward(const Tensor& x) {
  Tensor hidden = linear1(x);
  hidden = options.activation_ == "relu" ? hidden.relu() : hidden.gelu();
  return dropout(linear2(dropout(hidden, options.dropout_, is_training())), options.dropout_, is_training());
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask, bool is_causal) {
  return feed_forward_block(self_attention_block(src, src_mask, src_key_padding_mask, is_causal));
}

Tensor TransformerEncoderLayerImpl::self_attention_block(const Tensor& src, const Tensor& src_mask,
                                                         const Tensor& src_key_padding_mask, bool is_causal) {
  auto self_attention = [&](const Tensor& x) {
    Tensor attended = self_attn(x, x, x, src_key_padding_mask, /*need_weights=*/false, src_mask,
                                /*average_attn_weights=*/true, is_causal)
                          .output;
    return dropout(attended, options.dropout_, is_training());
  };
  if (options.norm_first_) return src + self_attention(norm1(src));
  return norm1(src + self_attention(src));
}

Tensor TransformerEncoderLayerImpl::feed_forward_block(const Tensor& x) {
  if (options.norm_first_) return x + feed_forward(norm2(x));
  return norm2(x + feed_forward(x));
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderLayerOptions& layer_options, int64_t num_layers,
                                               LayerNorm final_norm)
    : Module("TransformerEncoder") {
  LOOM_CHECK(num_layers > 0, ValueError, "TransformerEncoder: num_layers must be positive, got ", num_layers);
  layers = register_module("layers", ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    TransformerEncoderLayer layer(layer_options);
    if (i > 0) layer->load_state_dict(stack_.front()->state_dict());  // as PyTorch's deepcopy of one layer
    layers->push_back(layer);
    stack_.push_back(layer);
  }
  if (!final_norm.is_empty()) norm = register_module("norm", final_norm);
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderOptions& options)
    : TransformerEncoderImpl(options.layer_, options.num_layers_, options.norm_) {
  checkpoint_layers_ = options.checkpoint_layers_;
  checkpoint_blocks_ = options.checkpoint_blocks_;
  checkpoint_keep_attention_ = options.checkpoint_keep_attention_;
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                       bool is_causal) {
  const CheckpointOptions options{.keep_attention = checkpoint_keep_attention_};
  // f(x) with f's activations recomputed in backward. It holds the options by value: a nested
  // use runs again in backward, after this call has returned.
  auto checkpointed = [options](std::function<Tensor(const Tensor&)> f, const Tensor& x) {
    return checkpoint([f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; }, {x}, options)[0];
  };
  Tensor x = src;
  for (const TransformerEncoderLayer& layer : stack_) {
    // The two blocks, each a checkpoint of its own.
    auto blocks = [layer, mask, src_key_padding_mask, is_causal, checkpointed](const Tensor& in) {
      const Tensor attended = checkpointed([layer, mask, src_key_padding_mask, is_causal](const Tensor& a) {
        return layer->self_attention_block(a, mask, src_key_padding_mask, is_causal);
      }, in);
      return checkpointed([layer](const Tensor& a) { return layer->feed_forward_block(a); }, attended);
    };
    if (checkpoint_blocks_ && checkpoint_layers_) {
      x = checkpointed(blocks, x);  // nested: the layer's input saved, the blocks recomputed from it
    } else if (checkpoint_blocks_) {
      x = blocks(x);
    } else if (checkpoint_layers_) {
      x = checkpointed([layer, mask, src_key_padding_mask, is_causal](const Tensor& in) {
        return layer(in, mask, src_key_padding_mask, is_causal);
      }, x);
    } else {
      x = layer(x, mask, src_key_padding_mask, is_causal);
    }
  }
  return norm.is_empty() ? x : norm(x);
}

Tensor generate_square_subsequent_mask(int64_t size, TensorOptions options) {
  LOOM_CHECK(size > 0, ValueError, "generate_square_subsequent_mask: size must be positive, got ", size);
  const TensorOptions positions = TensorOptions(kInt64).device(options.device_);  // made there: no wait for a copy
  const Tensor i = arange(size, positions).reshape({size, 1}), j = arange(size, positions).reshape({1, size});
  return zeros({size, size}, options).masked_fill(j.gt(i), -std::numeric_limits<double>::infinity());
}

Tensor sinusoidal_positional_encoding(int64_t max_len, int64_t d_model, TensorOptions options) {
  LOOM_CHECK(max_len > 0 && d_model > 0, ValueError,
             "sinusoidal_positional_encoding: max_len and d_model must be positive, got ", max_len, " and ", d_model);
  std::vector<double> pe(static_cast<size_t>(max_len * d_model));
  for (int64_t pos = 0; pos < max_len; ++pos)
    for (int64_t c = 0; c < d_model; ++c) {
      const double angle = double(pos) * std::exp(-std::log(10000.0) * double(c - c % 2) / double(d_model));
      pe[size_t(pos * d_model + c)] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  return from_vector(pe, {max_len, d_model}).to(options.dtype_).to(options.device_);
}

PositionalEncodingImpl::PositionalEncodingImpl(int64_t d_model_, int64_t max_len_, bool learned_, double dropout_)
    : Module("PositionalEncoding"), d_model(d_model_), max_len(max_len_), learned(learned_), dropout(dropout_) {
  if (learned) {
    embedding = register_module("embedding", Embedding(max_len, d_model));
  } else {
    pe = register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model));
  }
}

Tensor PositionalEncodingImpl::forward(const Tensor& x) {
  LOOM_CHECK(x.dim() == 3 && x.size(2) == d_model && x.size(1) <= max_len, ShapeError,
             "PositionalEncoding: expected (N, T, ", d_model, ") with T <= max_len ", max_len, ", got ",
             shape_str(x.sizes()));
  const int64_t t = x.size(1);
  const Tensor positions =
      learned ? embedding(arange(t, TensorOptions(kInt64).device(x.device()))) : pe.narrow(0, 0, t);  // (T, d_model)
  return loom::dropout(x + positions.unsqueeze(0), dropout, is_training());
}

std::string PositionalEncodingImpl::extra_repr() const {
  return "d_model=" + std::to_string(d_model) + ", max_len=" + std::to_string(max_len) +
         (learned ? ", learned=True" : "") + (dropout > 0 ? ", dropout=" + std::to_string(dropout) : "");
}

}  // namespace loom::nn
