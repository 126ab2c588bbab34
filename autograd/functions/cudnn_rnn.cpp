#include "autograd/functions/cudnn_rnn.h"

#ifdef LOOM_WITH_CUDNN

#include "autograd/function.h"
#include "autograd/functions/internal.h"
#include "autograd/functions/rnn_layer.h"

namespace loom {

RNNStackResult cudnn_rnn(kernels::cuda::CudnnRNNConfig config, const Tensor& x, const Tensor& h0, const Tensor& c0,
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
  kernels::cuda::CudnnRNNOutput fwd = kernels::cuda::cudnn_rnn_forward(config, xd, h0d, c0d, plain_weights, lengths);
  RNNStackResult out{fwd.y, fwd.hy, fwd.cy};
  if (record_grad) {
    std::vector<Tensor> outputs{out.y, out.h_n};
    if (lstm) outputs.push_back(out.c_n);
    std::vector<Tensor> saved{xd, h0d, out.y.detach()};
    if (lstm) saved.push_back(c0d);
    // The weights live on in the node's packed copy (Note [cuDNN weight packing]).
    record(rnn_backward_name(config.mode), inputs, outputs, saved,
           [state = fwd.saved, lstm, n = weights.size()](BackwardContext& ctx) {
             kernels::cuda::CudnnRNNGrads g = kernels::cuda::cudnn_rnn_backward(
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

}  // namespace loom

#endif  // LOOM_WITH_CUDNN
