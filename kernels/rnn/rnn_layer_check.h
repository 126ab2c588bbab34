// The argument checks of one recurrent layer (kernels::rnn_layer_forward/backward), made
// once by the router for every device, and the layer's sizes.
#pragma once

#include "core/error.h"
#include "kernels/kernels.h"

namespace loom::kernels {

struct RNNLayerDims {
  int64_t T, B, I, H, G;  // steps, batch, input size, hidden size, gates
};

inline RNNLayerDims rnn_layer_dims(const RNNLayerInput& in) {
  return {in.x.size(0), in.x.size(1), in.x.size(2), in.w_hh.size(1), rnn_gates(in.mode)};
}

// Shapes, dtypes and devices.
inline RNNLayerDims check_rnn_layer(const RNNLayerInput& in) {
  const int64_t G = rnn_gates(in.mode);
  LOOM_CHECK(in.x.dim() == 3, ShapeError, "rnn: input must be (T, B, I), got ", shape_str(in.x.sizes()));
  const RNNLayerDims d = rnn_layer_dims(in);
  const int64_t B = d.B, I = d.I, H = d.H;
  LOOM_CHECK(in.w_ih.sizes() == Shape({G * H, I}) && in.w_hh.sizes() == Shape({G * H, H}), ShapeError,
             "rnn: weights ", shape_str(in.w_ih.sizes()), " and ", shape_str(in.w_hh.sizes()),
             " do not fit input size ", I, " and hidden size ", H, " with ", G, " gates");
  LOOM_CHECK(in.h0.sizes() == Shape({B, H}), ShapeError, "rnn: initial state ", shape_str(in.h0.sizes()),
             ", expected ", shape_str({B, H}));
  LOOM_CHECK(in.lengths.empty() || int64_t(in.lengths.size()) == B, ShapeError, "rnn: ", in.lengths.size(),
             " lengths for a batch of ", B);
  if (const Tensor& d = in.device_lengths; d.defined()) {
    LOOM_CHECK(in.lengths.empty(), ValueError, "rnn: lengths given both on the host and on ", d.device());
    LOOM_CHECK(d.sizes() == Shape({B}) && d.dtype() == kInt64 && d.is_contiguous(), ShapeError,
               "rnn: device lengths must be a contiguous int64 (", B, ") tensor, got ", dtype_name(d.dtype()), " ",
               shape_str(d.sizes()));
    LOOM_CHECK(d.device() == in.x.device(), DeviceError, "rnn: lengths on ", d.device(), ", the input on ",
               in.x.device());
  }
  LOOM_CHECK(in.x.is_floating_point(), DTypeError, "rnn: expected a floating-point input, got ",
             dtype_name(in.x.dtype()));
  for (const Tensor* t : {&in.h0, &in.c0, &in.w_ih, &in.w_hh, &in.b_ih, &in.b_hh}) {
    LOOM_CHECK(!t->defined() || t->dtype() == in.x.dtype(), DTypeError, "rnn: expected all tensors in ",
               dtype_name(in.x.dtype()), ", got a ", dtype_name(t->dtype()), " tensor of shape ", shape_str(t->sizes()));
    LOOM_CHECK(!t->defined() || t->device() == in.x.device(), DeviceError, "rnn: expected all tensors on ",
               in.x.device(), " (the input's device), got a tensor of shape ", shape_str(t->sizes()), " on ",
               t->device());
  }
  LOOM_CHECK(in.mode != RNNMode::LSTM || (in.c0.defined() && in.c0.sizes() == in.h0.sizes()), ShapeError,
             "rnn: LSTM needs a cell state of shape ", shape_str({B, H}));
  return d;
}

}  // namespace loom::kernels
