#include "nn/rnn.h"

#include <cmath>
#include <sstream>

#include "autograd/autocast.h"
#include "autograd/functions/rnn_chunked.h"
#include "autograd/functions/rnn_layer.h"
#include "autograd/functions/rnn_stack.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/trace.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

namespace {

// lengths' shape and dtype (input: the module's input as given, for messages; B its batch
// size). Their values are rnn_lengths' to check, where they live.
void check_lengths(const Tensor& lengths, const Tensor& input, int64_t B, const char* op) {
  if (!lengths.defined()) return;
  LOOM_CHECK(lengths.dim() == 1 && lengths.size(0) == B, ShapeError, op, ": lengths of shape ",
             shape_str(lengths.sizes()), " do not match the batch size ", B, " of the input of shape ",
             shape_str(input.sizes()));
  LOOM_CHECK(!lengths.is_floating_point() && lengths.dtype() != kBool, DTypeError, op,
             ": lengths must be an integer tensor, got ", dtype_name(lengths.dtype()));
}

// The kernels read every tensor as the input's dtype on the input's device.
void check_like(const Tensor& t, const Tensor& input, const char* what, const char* op) {
  LOOM_CHECK(t.device() == input.device(), DeviceError, op, ": ", what, " is on ", t.device(), ", the input on ",
             input.device());
  LOOM_CHECK(t.dtype() == input.dtype(), DTypeError, op, ": ", what, " is ", dtype_name(t.dtype()), ", the input ",
             dtype_name(input.dtype()));
}

Tensor zeros_state(int64_t n, int64_t B, int64_t H, const Tensor& like) {
  return zeros({n, B, H}, like.options());
}

void check_state(const Tensor& s, const Shape& expected, const char* what, const char* op) {
  LOOM_CHECK(s.sizes() == expected, ShapeError, op, ": ", what, " of shape ", shape_str(s.sizes()),
             ", expected ", shape_str(expected), " (num_layers * num_directions, batch, hidden_size)");
}

}  // namespace

// ---- RNN / LSTM / GRU ---------------------------------------------------------------------

RNNBaseImpl::RNNBaseImpl(RNNMode mode, const RNNOptions& o, const char* type_name)
    : Module(type_name), options(o), mode_(mode) {
  LOOM_CHECK(o.input_size_ > 0 && o.hidden_size_ > 0 && o.num_layers_ > 0, ValueError, type_name,
             ": input_size, hidden_size and num_layers must be positive, got ", o.input_size_, ", ",
             o.hidden_size_, ", ", o.num_layers_);
  LOOM_CHECK(o.dropout_ >= 0 && o.dropout_ <= 1, ValueError, type_name, ": dropout must be in [0, 1], got ",
             o.dropout_);
  LOOM_CHECK(o.checkpoint_every_ >= 0, ValueError, type_name, ": checkpoint_every must be >= 0 (0: off), got ",
             o.checkpoint_every_);
  const int64_t G = rnn_gates(mode), H = o.hidden_size_, D = o.bidirectional_ ? 2 : 1;
  for (int64_t layer = 0; layer < o.num_layers_; ++layer) {
    for (int64_t dir = 0; dir < D; ++dir) {
      const std::string suffix = "_l" + std::to_string(layer) + (dir == 1 ? "_reverse" : "");
      const int64_t in = layer == 0 ? o.input_size_ : H * D;
      flat_weights_.push_back(register_parameter("weight_ih" + suffix, empty({G * H, in})));
      flat_weights_.push_back(register_parameter("weight_hh" + suffix, empty({G * H, H})));
      if (o.bias_) {
        flat_weights_.push_back(register_parameter("bias_ih" + suffix, empty({G * H})));
        flat_weights_.push_back(register_parameter("bias_hh" + suffix, empty({G * H})));
      } else {
        flat_weights_.insert(flat_weights_.end(), 2, Tensor());
      }
    }
  }
  reset_parameters();
}

void RNNBaseImpl::reset_parameters() {
  const double bound = 1.0 / std::sqrt(double(options.hidden_size_));  // PyTorch's default
  for (Tensor& w : flat_weights_)
    if (w.defined()) init::uniform_(w, -bound, bound);
}

namespace {

// The autocast name of a layer or cell (kernels/support/autocast_policy.h).
const char* autocast_name(RNNMode mode, bool cell) {
  if (mode == RNNMode::LSTM) return cell ? "lstm_cell" : "lstm";
  if (mode == RNNMode::GRU) return cell ? "gru_cell" : "gru";
  return cell ? "rnn_cell" : "rnn";
}

}  // namespace

RNNOutput RNNBaseImpl::forward(const Tensor& input_in, const RNNState& state_in, const Tensor& lengths) {
  // Recorded whole, as ONNX's RNN, LSTM and GRU nodes (Note [op tracing], core/trace.h).
  const trace::OpScope trace;
  const char* op = type_name().c_str();
  std::vector<Tensor> cast = {input_in, state_in.h, state_in.c};
  cast.insert(cast.end(), flat_weights_.begin(), flat_weights_.end());
  cast = autocast::cast_recurrent_inputs(autocast_name(mode_, false), std::move(cast), 3);
  const Tensor& input = cast[0];
  const RNNState state{cast[1], cast[2]};
  const std::vector<Tensor> weights(cast.begin() + 3, cast.end());
  LOOM_CHECK(input.dim() == 3, ShapeError, op, ": expected a 3-D input (", options.batch_first_ ? "B, T, I" : "T, B, I",
             "), got shape ", shape_str(input.sizes()));
  Tensor x = options.batch_first_ ? input.transpose(0, 1) : input;  // (T, B, I)
  const int64_t T = x.size(0), B = x.size(1), H = options.hidden_size_;
  const int64_t D = options.bidirectional_ ? 2 : 1, L = options.num_layers_;
  LOOM_CHECK(x.size(2) == options.input_size_, ShapeError, op, ": input of shape ", shape_str(input.sizes()),
             " has feature size ", x.size(2), ", expected input_size ", options.input_size_);
  LOOM_CHECK(T > 0, ShapeError, op, ": the input has no time steps, shape ", shape_str(input.sizes()));
  check_lengths(lengths, input, B, op);
  const RNNLengths lens = rnn_lengths(lengths, x, op, input.sizes());
  const bool lstm = mode_ == RNNMode::LSTM;
  check_like(weights[0], input, "the parameters", op);
  Tensor h0 = state.h.defined() ? state.h : zeros_state(L * D, B, H, x);
  Tensor c0 = lstm ? (state.c.defined() ? state.c : zeros_state(L * D, B, H, x)) : Tensor();
  check_state(h0, {L * D, B, H}, "h0", op);
  check_like(h0, input, "h0", op);
  if (lstm) {
    check_state(c0, {L * D, B, H}, "c0", op);
    check_like(c0, input, "c0", op);
  }

  // The device's whole-stack kernel (cuDNN) or one node per layer: rnn_stack decides.
  const RNNStackConfig config{mode_, options.input_size_, H, L, options.bidirectional_,
                                       is_training() ? options.dropout_ : 0.0};
  const RNNStackResult r = rnn_stack_chunked(config, options.checkpoint_every_, x, h0, c0, weights, lens);
  RNNOutput out{options.batch_first_ ? r.y.transpose(0, 1) : r.y, r.h_n, r.c_n};
  if (trace) trace.record({"rnn", {input_in, state_in.h, state_in.c, lengths}, {out.output, out.h_n, out.c_n}, {}, {}, this});
  return out;
}

// As PyTorch's RNNBase.extra_repr (which does not show the nonlinearity).
std::string RNNBaseImpl::extra_repr() const {
  std::ostringstream os;
  os << options.input_size_ << ", " << options.hidden_size_;
  if (options.num_layers_ != 1) os << ", num_layers=" << options.num_layers_;
  if (!options.bias_) os << ", bias=False";
  if (options.batch_first_) os << ", batch_first=True";
  if (options.dropout_ != 0) os << ", dropout=" << options.dropout_;
  if (options.bidirectional_) os << ", bidirectional=True";
  return os.str();
}

namespace {
RNNMode rnn_mode(const std::string& nonlinearity, const char* op) {
  LOOM_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", ValueError, op,
             ": nonlinearity must be 'tanh' or 'relu', got '", nonlinearity, "'");
  return nonlinearity == "relu" ? RNNMode::RNN_RELU : RNNMode::RNN_TANH;
}
}  // namespace

RNNImpl::RNNImpl(const RNNOptions& o) : RNNBaseImpl(rnn_mode(o.nonlinearity_, "RNN"), o, "RNN") {}

// ---- cells ----------------------------------------------------------------------------------------

RNNCellBaseImpl::RNNCellBaseImpl(RNNMode mode, int64_t input_size_, int64_t hidden_size_, bool bias,
                                 const char* type_name)
    : Module(type_name), input_size(input_size_), hidden_size(hidden_size_), mode_(mode) {
  LOOM_CHECK(input_size > 0 && hidden_size > 0, ValueError, type_name,
             ": input_size and hidden_size must be positive, got ", input_size, " and ", hidden_size);
  const int64_t G = rnn_gates(mode);
  const double bound = 1.0 / std::sqrt(double(hidden_size));
  weight_ih = register_parameter("weight_ih", empty({G * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", empty({G * hidden_size, hidden_size}));
  init::uniform_(weight_ih, -bound, bound);
  init::uniform_(weight_hh, -bound, bound);
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({G * hidden_size}));
    bias_hh = register_parameter("bias_hh", empty({G * hidden_size}));
    init::uniform_(bias_ih, -bound, bound);
    init::uniform_(bias_hh, -bound, bound);
  }
}

RNNState RNNCellBaseImpl::forward(const Tensor& x_in, const RNNState& state_in) {
  const trace::OpScope trace;  // recorded whole: onnx/convert_cell.cpp decomposes it
  const char* op = type_name().c_str();
  const std::vector<Tensor> cast = autocast::cast_recurrent_inputs(
      autocast_name(mode_, true), {x_in, state_in.h, state_in.c, weight_ih, weight_hh, bias_ih, bias_hh}, 3);
  const Tensor& x = cast[0];
  const RNNState state{cast[1], cast[2]};
  const Tensor &w_ih = cast[3], &w_hh = cast[4], &b_ih = cast[5], &b_hh = cast[6];
  LOOM_CHECK(x.dim() == 2 && x.size(1) == input_size, ShapeError, op, ": input of shape ", shape_str(x.sizes()),
             ", expected (batch, ", input_size, ")");
  const int64_t B = x.size(0);
  const bool lstm = mode_ == RNNMode::LSTM;
  Tensor h = state.h.defined() ? state.h : zeros({B, hidden_size}, x.options());
  Tensor c = lstm ? (state.c.defined() ? state.c : zeros({B, hidden_size}, x.options())) : Tensor();
  LOOM_CHECK(h.sizes() == Shape({B, hidden_size}), ShapeError, op, ": hidden state of shape ", shape_str(h.sizes()),
             ", expected ", shape_str({B, hidden_size}));
  check_like(w_ih, x, "the parameters", op);
  check_like(h, x, "the hidden state", op);
  if (lstm) {
    LOOM_CHECK(c.sizes() == Shape({B, hidden_size}), ShapeError, op, ": cell state of shape ",
               shape_str(c.sizes()), ", expected ", shape_str({B, hidden_size}));
    check_like(c, x, "the cell state", op);
  }
  // A cell is a one-step layer: the same fused kernel and backward.
  RNNLayerResult r = rnn_layer(mode_, x.unsqueeze(0), h, c, w_ih, w_hh, b_ih, b_hh, {}, false);
  if (trace) trace.record({"rnn_cell", {x_in, state_in.h, state_in.c}, {r.h_n, r.c_n}, {int64_t(mode_)}, {}, this});
  return {r.h_n, r.c_n};
}

std::string RNNCellBaseImpl::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (!bias_ih.defined()) s += ", bias=False";
  if (mode_ == RNNMode::RNN_RELU) s += ", nonlinearity=relu";
  return s;
}

RNNCellImpl::RNNCellImpl(int64_t input_size, int64_t hidden_size, bool bias, const std::string& nonlinearity)
    : RNNCellBaseImpl(rnn_mode(nonlinearity, "RNNCell"), input_size, hidden_size, bias, "RNNCell") {}

// ---- pad_sequence ------------------------------------------------------------------------------------

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  LOOM_CHECK(!sequences.empty(), ValueError, "pad_sequence: got an empty list of sequences");
  int64_t max_len = 0;
  const Shape trailing(sequences[0].sizes().begin() + 1, sequences[0].sizes().end());
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    LOOM_CHECK(s.dim() >= 1 && Shape(s.sizes().begin() + 1, s.sizes().end()) == trailing, ShapeError,
               "pad_sequence: sequence ", i, " has shape ", shape_str(s.sizes()), " but sequence 0 has ",
               shape_str(sequences[0].sizes()), " (all but the first dim must match)");
    max_len = std::max(max_len, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    if (s.size(0) == max_len) {
      padded.push_back(s);
      continue;
    }
    Shape pad_shape = s.sizes();
    pad_shape[0] = max_len - s.size(0);
    padded.push_back(cat({s, full(pad_shape, padding_value, s.options())}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

}  // namespace loom::nn
