#include "autograd/functions/rnn_layer.h"

#include "autograd/function.h"
#include "autograd/functions/internal.h"

namespace loom {

const char* rnn_backward_name(kernels::RNNMode mode) {
  switch (mode) {
    case kernels::RNNMode::LSTM: return "LSTMBackward";
    case kernels::RNNMode::GRU: return "GRUBackward";
    default: return "RNNBackward";
  }
}

RNNLayerResult rnn_layer(kernels::RNNMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                         const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                         const RNNLengths& lengths, bool reverse) {
  const bool lstm = mode == kernels::RNNMode::LSTM;
  kernels::RNNLayerInput in{mode,           detached(x),    detached(h0),   detached(c0), detached(w_ih),
                            detached(w_hh), detached(b_ih), detached(b_hh), lengths.host, reverse,
                            lengths.device};
  kernels::RNNLayerOutput fwd = kernels::rnn_layer_forward(in);
  RNNLayerResult out{fwd.y, fwd.h_n, fwd.c_n};
  if (needs_grad(x, h0, c0, w_ih, w_hh, b_ih, b_hh)) {
    std::vector<Tensor> outputs{out.y, out.h_n};
    if (lstm) outputs.push_back(out.c_n);
    // The weights and the input are saved (checked against in-place changes such as an
    // optimizer step before backward), and so is the reserve, so that saved-tensor hooks see
    // it (activation checkpointing drops it: autograd/functions/rnn_chunked.cpp).
    const kernels::RNNReserve& r = fwd.reserve;
    record(rnn_backward_name(mode), {x, h0, c0, w_ih, w_hh, b_ih, b_hh}, outputs,
           {x, w_ih, w_hh, r.h_prev, r.c_prev, r.tanh_c, r.gates, r.gh_n},
           [in, lstm](BackwardContext& ctx) mutable {
             in.x = ctx.saved[0];
             in.w_ih = ctx.saved[1];
             in.w_hh = ctx.saved[2];
             const kernels::RNNReserve reserve{ctx.saved[3], ctx.saved[4], ctx.saved[5], ctx.saved[6], ctx.saved[7]};
             kernels::RNNLayerGrads g = kernels::rnn_layer_backward(
                 in, reserve, ctx.grads[0], ctx.grads[1], lstm ? ctx.grads[2] : Tensor());
             return std::vector<Tensor>{g.dx, g.dh0, g.dc0, g.dw_ih, g.dw_hh, g.db_ih, g.db_hh};
           });
  }
  return out;
}

}  // namespace loom
