// The per-element gate math of the recurrent cells (forward and backward), shared by the
// CPU whole-sequence kernels and the CUDA cell kernels (LOOM_HOST_DEVICE).
//
// Gate layouts follow PyTorch: LSTM (i, f, g, o), GRU (r, z, n), each block H wide.
#pragma once

#include <cmath>

#include "core/half.h"

namespace loom::kernels::rnn_math {

template <typename T>
LOOM_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// LSTM step for one (batch, unit): pre-activations gi, gf, gg, go (input projection +
// recurrent projection + both biases). Writes the activations back into the gate slots
// (kept for backward) and the new c and h.
template <typename T>
struct LstmForward {
  LOOM_HOST_DEVICE void operator()(T& gi, T& gf, T& gg, T& go, T c_prev, T& c, T& h) const {
    gi = sigmoid(gi);
    gf = sigmoid(gf);
    gg = std::tanh(gg);
    go = sigmoid(go);
    c = gf * c_prev + gi * gg;
    h = go * std::tanh(c);
  }
};

// LSTM backward for one (batch, unit): from the incoming dh (output + next step) and dc,
// the saved activations i, f, g, o, c_prev and tanh(c): pre-activation gradients, and dc
// becomes dc_prev.
template <typename T>
struct LstmBackward {
  LOOM_HOST_DEVICE void operator()(T dh, T& dc, T i, T f, T g, T o, T c_prev, T tc, T& di, T& df, T& dg,
                                   T& do_) const {
    const T dc_total = dc + dh * o * (T(1) - tc * tc);
    do_ = dh * tc * o * (T(1) - o);
    di = dc_total * g * i * (T(1) - i);
    dg = dc_total * i * (T(1) - g * g);
    df = dc_total * c_prev * f * (T(1) - f);
    dc = dc_total * f;  // becomes dc_prev
  }
};

// GRU step: x_r, x_z, x_n from the input projection (with b_ih), h_r, h_z, h_n from the
// recurrent projection (with b_hh). Keeps r, z, n (in the x slots) and h_n for backward.
template <typename T>
struct GruForward {
  LOOM_HOST_DEVICE void operator()(T& xr, T& xz, T& xn, T hr, T hz, T hn, T h_prev, T& h) const {
    const T r = sigmoid(xr + hr);
    const T z = sigmoid(xz + hz);
    const T n = std::tanh(xn + r * hn);
    h = (T(1) - z) * n + z * h_prev;
    xr = r;
    xz = z;
    xn = n;
  }
};

// GRU backward: gradients w.r.t. the input-projection pre-activations (dxr, dxz, dxn), the
// recurrent-projection ones (dhr = dxr, dhz = dxz, dhn) and the direct part of dh_prev.
template <typename T>
struct GruBackward {
  LOOM_HOST_DEVICE void operator()(T dh, T r, T z, T n, T hn, T h_prev, T& dxr, T& dxz, T& dxn, T& dhn,
                                   T& dh_prev_direct) const {
    const T dn = dh * (T(1) - z);
    const T dz = dh * (h_prev - n);
    dh_prev_direct = dh * z;
    dxn = dn * (T(1) - n * n);
    dhn = dxn * r;
    const T dr = dxn * hn;
    dxr = dr * r * (T(1) - r);
    dxz = dz * z * (T(1) - z);
  }
};

// Elman RNN: h = tanh(pre) or relu(pre); the backward needs only h.
template <typename T>
LOOM_HOST_DEVICE inline T rnn_activation(T pre, bool relu) {
  return relu ? (pre > T(0) ? pre : T(0)) : std::tanh(pre);
}
template <typename T>
LOOM_HOST_DEVICE inline T rnn_activation_grad(T dh, T h, bool relu) {
  return relu ? (h > T(0) ? dh : T(0)) : dh * (T(1) - h * h);
}

}  // namespace loom::kernels::rnn_math
