// The gate math of the recurrent cells (forward and backward), shared by the CPU
// whole-sequence kernels (kernels/cpu/rnn.cpp) and the step-functor sweep that the CUDA
// kernels run (kernels/rnn/rnn_sweep.h); LOOM_HOST_DEVICE.
//
// Gate layouts follow PyTorch: LSTM (i, f, g, o), GRU (r, z, n), each block H wide.
//
// Note [cell math over a run of units]
// A forward cell works on a run of n units of one batch row, its gates laid out as the
// reserve keeps them: gate k of unit j at g[k·n + j]. The CPU passes a whole row (n = H,
// in place in the reserve); the sweep passes one unit (n = 1, opmath copies in registers).
// The activations are the caller's policy: ScalarActivations below for the sweep, Eigen's
// packet math over the run on the CPU (kernels/cpu/vector_math.h), which a compiler does
// not make out of a loop of std::exp and std::tanh. Every other loop of a cell is a plain
// loop over contiguous values, vectorised for n = H and unrolled away for n = 1. The
// backward cells need no transcendentals, so they stay per element: the CPU calls them in
// a loop over the H units of a row, the sweep once per (row, unit).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/half.h"

namespace loom::kernels::rnn_math {

template <typename T>
LOOM_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// The activations of a forward cell, one value at a time: x[k] = f(x[k]) for k < n.
struct ScalarActivations {
  template <typename T>
  LOOM_HOST_DEVICE void sigmoid(T* x, int64_t n) const {
    for (int64_t k = 0; k < n; ++k) x[k] = rnn_math::sigmoid(x[k]);
  }
  template <typename T>
  LOOM_HOST_DEVICE void tanh(T* x, int64_t n) const {
    for (int64_t k = 0; k < n; ++k) x[k] = std::tanh(x[k]);
  }
};

// LSTM step over n units (Note [cell math over a run of units]): g (4n) holds the
// pre-activations i, f, g, o (input projection + recurrent projection + both biases) and
// gets the activations (kept for backward); from c_prev (n): c, tanh(c) and h (n each),
// h also to y (the step's output; may be h itself).
template <typename T>
struct LstmForward {
  template <typename Act>
  LOOM_HOST_DEVICE void operator()(const Act& act, T* g, const T* c_prev, T* c, T* tanh_c, T* h, T* y,
                                   int64_t n) const {
    act.sigmoid(g, 2 * n);      // i, f
    act.tanh(g + 2 * n, n);     // g
    act.sigmoid(g + 3 * n, n);  // o
    for (int64_t j = 0; j < n; ++j) tanh_c[j] = c[j] = g[n + j] * c_prev[j] + g[j] * g[2 * n + j];
    act.tanh(tanh_c, n);
    for (int64_t j = 0; j < n; ++j) y[j] = h[j] = g[3 * n + j] * tanh_c[j];
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

// GRU step over n units (Note [cell math over a run of units]): g (3n) holds x_r, x_z,
// x_n (input projection + b_ih) and gets r, z, n (kept for backward); gh (3n) is the
// recurrent projection W_hh h + b_hh, whose n part goes to gh_n (n, kept for backward);
// from h_prev (n): h (n), also to y (the step's output; may be h itself).
template <typename T>
struct GruForward {
  template <typename Act>
  LOOM_HOST_DEVICE void operator()(const Act& act, T* g, const T* gh, const T* h_prev, T* gh_n, T* h, T* y,
                                   int64_t n) const {
    for (int64_t j = 0; j < 2 * n; ++j) g[j] += gh[j];  // r, z pre-activations
    act.sigmoid(g, 2 * n);
    for (int64_t j = 0; j < n; ++j) {
      gh_n[j] = gh[2 * n + j];
      g[2 * n + j] += g[j] * gh_n[j];  // n pre-activation: x_n + r · (W_hn h + b_hn)
    }
    act.tanh(g + 2 * n, n);
    for (int64_t j = 0; j < n; ++j) y[j] = h[j] = (T(1) - g[n + j]) * g[2 * n + j] + g[n + j] * h_prev[j];
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

// Elman RNN step over n units (Note [cell math over a run of units]): g (n) holds the
// pre-activations and gets h = tanh(g) or relu(g), which also goes to h and y (n each; the
// step's output, which may be h itself).
template <typename T>
struct RnnForward {
  template <typename Act>
  LOOM_HOST_DEVICE void operator()(const Act& act, T* g, T* h, T* y, int64_t n, bool relu) const {
    if (relu) {
      for (int64_t j = 0; j < n; ++j) g[j] = g[j] > T(0) ? g[j] : T(0);
    } else {
      act.tanh(g, n);
    }
    for (int64_t j = 0; j < n; ++j) y[j] = h[j] = g[j];
  }
};

// The Elman RNN's backward needs only h.
template <typename T>
LOOM_HOST_DEVICE inline T rnn_activation_grad(T dh, T h, bool relu) {
  return relu ? (h > T(0) ? dh : T(0)) : dh * (T(1) - h * h);
}

}  // namespace loom::kernels::rnn_math
