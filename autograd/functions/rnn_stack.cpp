#include "autograd/functions/rnn_stack.h"

#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "autograd/functions/rnn_layer.h"
#include "core/factories.h"
#include "core/ops.h"

namespace loom {
namespace {

// The whole stack as one node over kernels::rnn_stack_forward/backward.
RNNStackResult fused_stack(kernels::RNNStackConfig config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                           const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths) {
  const bool lstm = config.mode == kernels::RNNMode::LSTM;
  std::vector<Tensor> inputs{x, h0, c0};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  // cuDNN draws inter-layer dropout only in its training mode, so a module in train() with
  // dropout runs that mode even under no-grad (as on the CPU and in PyTorch); the autograd
  // node is recorded only when a gradient is wanted.
  const bool record_grad = needs_grad_list(inputs);
  config.training = record_grad || (config.dropout > 0 && config.num_layers > 1);
  std::vector<Tensor> plain_weights;
  for (const Tensor& w : weights) plain_weights.push_back(detached(w));
  const Tensor xd = x.detach().contiguous(), h0d = h0.detach(), c0d = detached(c0);
  kernels::RNNStackOutput fwd = kernels::rnn_stack_forward(config, xd, h0d, c0d, plain_weights, lengths);
  RNNStackResult out{fwd.y, fwd.hy, fwd.cy};
  if (record_grad) {
    std::vector<Tensor> outputs{out.y, out.h_n};
    if (lstm) outputs.push_back(out.c_n);
    std::vector<Tensor> saved{xd, h0d, out.y.detach()};
    if (lstm) saved.push_back(c0d);
    // The weights live on in the backend's saved state (e.g. cuDNN's packed copy).
    record(rnn_backward_name(config.mode), inputs, outputs, saved,
           [state = fwd.saved, lstm, n = weights.size()](BackwardContext& ctx) {
             kernels::RNNStackGrads g = kernels::rnn_stack_backward(
                 *state, ctx.saved[0], ctx.saved[1], lstm ? ctx.saved[3] : Tensor(), ctx.saved[2], ctx.grads[0],
                 ctx.grads[1], lstm ? ctx.grads[2] : Tensor());
             std::vector<Tensor> grads{g.dx, g.dhx, g.dcx};
             grads.insert(grads.end(), g.dweights.begin(), g.dweights.end());
             grads.resize(3 + n);
             return grads;
           });
  }
  return out;
}

}  // namespace

// One whole-sequence node per layer and direction, with dropout between layers.
RNNStackResult rnn_stack_by_layer(const kernels::RNNStackConfig& config, const Tensor& x, const Tensor& h0,
                                  const Tensor& c0, const std::vector<Tensor>& weights,
                                  const RNNLengths& lengths, const RNNLayerFn& run_layer) {
  const bool lstm = config.mode == kernels::RNNMode::LSTM;
  const int64_t D = config.bidirectional ? 2 : 1, L = config.num_layers;
  std::vector<Tensor> h_n, c_n;
  Tensor layer_input = x;
  for (int64_t layer = 0; layer < L; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t dir = 0; dir < D; ++dir) {
      const int64_t k = layer * D + dir;
      const Tensor* w = &weights[size_t(4 * k)];
      RNNLayerResult r = run_layer(config.mode, layer_input, h0[k], lstm ? c0[k] : Tensor(), w[0], w[1], w[2],
                                   w[3], lengths, dir == 1);
      outputs.push_back(r.y);
      h_n.push_back(r.h_n);
      if (lstm) c_n.push_back(r.c_n);
    }
    layer_input = D == 1 ? outputs[0] : cat(outputs, 2);  // (T, B, D·H)
    if (layer + 1 < L && config.dropout > 0) layer_input = dropout(layer_input, config.dropout, true);
  }
  RNNStackResult out{layer_input, stack(h_n, 0), Tensor()};
  if (lstm) out.c_n = stack(c_n, 0);
  return out;
}

RNNLengths rnn_lengths(const Tensor& lengths, const Tensor& x, const char* op, const Shape& input_shape) {
  if (!lengths.defined()) return {};
  const int64_t T = x.size(0);
  const std::string context = "an input of shape " + shape_str(input_shape);
  if (lengths.is_cpu()) {
    std::vector<int64_t> host = lengths.to_vector<int64_t>();
    kernels::check_sequence_lengths(from_vector(host), T, op, context);
    return host;
  }
  LOOM_CHECK(lengths.device() == x.device(), DeviceError, op, ": lengths on ", lengths.device(),
             " must be on the CPU or on the input's device ", x.device());
  const Tensor on_device = lengths.to(kInt64).contiguous();  // queued on the device: no sync
  kernels::check_sequence_lengths(on_device, T, op, context);
  return RNNLengths::on_device(on_device);
}

RNNStackResult rnn_stack(kernels::RNNStackConfig config, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const std::vector<Tensor>& weights, const RNNLengths& lengths) {
  if (!lengths.device.defined() && kernels::rnn_stack_supported(x))
    return fused_stack(config, x, h0, c0, weights, lengths.host);
  return rnn_stack_by_layer(config, x, h0, c0, weights, lengths, rnn_layer);
}

}  // namespace loom
