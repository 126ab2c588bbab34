// What every implementation of a whole-sequence recurrent layer shares: the length and
// direction rules, the bias folding, the reserve and the GEMMs around the sweep. Used by
// the CPU kernels (kernels/cpu/rnn.cpp), the step-functor sweep that the CUDA kernels run
// (kernels/rnn/rnn_sweep.h) and, for the lengths, cuDNN's layers (kernels/cuda/cudnn_rnn.cpp).
//
// Note [recurrent layer rules]
// - Directions: step s of a layer runs at time t = s, or t = T-1-s in reverse.
// - Lengths follow PyTorch's packed sequences: row b takes part in the steps at
//   t < length[b] (all T without lengths). At any other step the row is skipped: its state
//   is carried unchanged, its output y[t] is zero, its gates (and GRU's gh_n) in the reserve
//   are zero, and in backward dh and dc pass through it with zero gate gradients. So a
//   forward direction's final state is the one at the row's last valid step, and a
//   reverse direction starts at that step from h0.
// - Biases: LSTM and RNN fold b_ih + b_hh into the input projection of all steps. GRU adds
//   only b_ih there and b_hh to the recurrent projection at every step, as its n gate
//   multiplies that by r: n = tanh(x_n + r · (W_hn h + b_hn)). So db_ih = db_hh = Σ dG
//   for LSTM and RNN, and GRU's db_hh = Σ dGh (the recurrent pre-activations' gradients).
// - The reserve (kernels::RNNReserve) is indexed by time, not by step: forward writes
//   gates, h_prev and GRU's gh_n at every (step, row), and LSTM's c_prev and tanh_c only
//   where the row is valid (they start at zero).
//
// Note [16-bit recurrent layers]
// A bfloat16 or float16 layer (autocast's, kernels/support/autocast_policy.h) runs the float32
// algorithm on its inputs widened to float32 (exact) and rounds y, h_n and c_n (in backward
// each gradient) back once: the gate math and the cell state stay float32, as mixed
// precision and oneDNN's bfloat16 LSTM have them, and the reserve stays float32. The CPU
// kernels (which also multiply bfloat16 operands on the bfloat16 GEMM: Note [16-bit
// recurrent layers on the CPU]) and the CUDA sweep both run it (forward_in_float32,
// backward_in_float32 below); cuDNN runs float16 layers itself (kernels/cuda/cudnn_rnn.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace loom::kernels::rnn_rules {

LOOM_HOST_DEVICE inline int64_t step_time(int64_t s, int64_t T, bool reverse) { return reverse ? T - 1 - s : s; }

// The length of every batch row, as the kernels read them (host or device memory).
struct Lengths {
  const int64_t* per_row;  // (B), or null: every row runs all T steps
  int64_t T;
  LOOM_HOST_DEVICE int64_t of(int64_t b) const { return per_row != nullptr ? per_row[b] : T; }
  // Whether row b takes part in the step at time t.
  LOOM_HOST_DEVICE bool valid(int64_t b, int64_t t) const { return t < of(b); }
};

// RNNLayerInput::lengths (or those given to cuDNN's layers) in host memory.
inline Lengths host_lengths(const std::vector<int64_t>& lengths, int64_t T) {
  return {lengths.empty() ? nullptr : lengths.data(), T};
}

// A layer's lengths where its backend's kernels read them: RNNLayerInput::device_lengths
// (the backend's own memory) if given, else the host's.
inline Lengths layer_lengths(const RNNLayerInput& in) {
  const int64_t T = in.x.size(0);
  if (in.device_lengths.defined()) return {in.device_lengths.data_ptr<int64_t>(), T};
  return host_lengths(in.lengths, T);
}

// Zeroes G gate blocks of n units, gate k of unit j at g[k·stride + j].
template <typename T>
LOOM_HOST_DEVICE inline void zero_gates(T* g, int64_t G, int64_t stride, int64_t n) {
  for (int64_t k = 0; k < G; ++k)
    for (int64_t j = 0; j < n; ++j) g[k * stride + j] = T(0);
}

// A skipped (row, step) in forward, for n units of the row: zero gates (layout as in
// zero_gates) and GRU's gh_n (n, contiguous; ignored for the others). The state is carried
// and y stays zero, so there is nothing else to write.
template <typename T>
LOOM_HOST_DEVICE inline void skip_forward(RNNMode mode, T* g, T* gh_n, int64_t stride, int64_t n) {
  zero_gates(g, rnn_gates(mode), stride, n);
  if (mode == RNNMode::GRU)
    for (int64_t j = 0; j < n; ++j) gh_n[j] = T(0);
}

// A skipped (row, step) in backward: zero gate gradients w.r.t. the input projection (dg)
// and, for GRU, the recurrent one (dgh; the same tensor for the others). dh and dc pass
// through unchanged.
template <typename T>
LOOM_HOST_DEVICE inline void skip_backward(RNNMode mode, T* dg, T* dgh, int64_t stride, int64_t n) {
  zero_gates(dg, rnn_gates(mode), stride, n);
  if (mode == RNNMode::GRU) zero_gates(dgh, rnn_gates(mode), stride, n);
}

// out (M, N) = a (M, K) · b (K, N) + beta · out, on 2-D views, on the tensors' device.
inline void mm(const Tensor& out, const Tensor& a, const Tensor& b, double beta = 0) {
  bmm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), beta);
}

// The bias added to the input projection of all steps: b_ih + b_hh, or GRU's b_ih alone
// (undefined without biases).
inline Tensor input_bias(const RNNLayerInput& in) {
  if (!in.b_ih.defined()) return Tensor();
  return in.mode == RNNMode::GRU ? in.b_ih.contiguous() : (in.b_ih + in.b_hh).contiguous();
}

// The bias added to the recurrent projection at every step: GRU's b_hh, else undefined.
inline Tensor recurrent_bias(const RNNLayerInput& in) {
  return in.mode == RNNMode::GRU && in.b_hh.defined() ? in.b_hh.contiguous() : Tensor();
}

// The reserve of a (mode, T, B, H) layer: gates (T, B, G·H) and h_prev (T, B, H), which
// forward writes in full; c_prev, tanh_c (LSTM) and gh_n (GRU), (T, B, H) zeros.
inline RNNReserve allocate_reserve(RNNMode mode, int64_t T, int64_t B, int64_t H, const TensorOptions& opt) {
  RNNReserve r;
  r.gates = empty({T, B, rnn_gates(mode) * H}, opt);
  r.h_prev = empty({T, B, H}, opt);
  if (mode == RNNMode::LSTM) {
    r.c_prev = zeros({T, B, H}, opt);
    r.tanh_c = zeros({T, B, H}, opt);
  }
  if (mode == RNNMode::GRU) r.gh_n = zeros({T, B, H}, opt);
  return r;
}

// x (M, N) += bias (N) on every row, on the tensors' device.
inline void add_to_rows(const Tensor& x, const Tensor& bias) { binary(BinaryOp::Add, x, x, bias.expand(x.sizes())); }

// Forward before the sweep: the reserve, with the input projection of all steps in its
// gates (a GEMM `gemm(out, a, b)`: out = a · b, as finish_backward's; its bias added by
// `add_bias(x, bias)`, as add_to_rows); y (T, B, H) zero; h_n and c_n (B, H) copies of h0
// and c0, the running state that the sweep leaves final.
template <typename AddBias, typename Gemm>
RNNLayerOutput begin_forward(const RNNLayerInput& in, const AddBias& add_bias, const Gemm& gemm) {
  const int64_t T = in.x.size(0), B = in.x.size(1), I = in.x.size(2), H = in.w_hh.size(1);
  const int64_t GH = rnn_gates(in.mode) * H;
  const TensorOptions opt = in.x.options();
  RNNLayerOutput out;
  out.reserve = allocate_reserve(in.mode, T, B, H, opt);
  // XP (T·B, G·H) = X (T·B, I) · W_ih^T + bias; the cells turn it into the gates in place.
  const Tensor xp = out.reserve.gates.view({T * B, GH});
  gemm(xp, in.x.contiguous().view({T * B, I}), in.w_ih.t());
  const Tensor bias = input_bias(in);
  if (bias.defined()) add_bias(xp, bias);
  out.y = zeros({T, B, H}, opt);
  out.h_n = in.h0.contiguous().clone();
  if (in.mode == RNNMode::LSTM) out.c_n = in.c0.contiguous().clone();
  return out;
}

template <typename AddBias>
RNNLayerOutput begin_forward(const RNNLayerInput& in, const AddBias& add_bias) {
  return begin_forward(in, add_bias, [](const Tensor& out, const Tensor& a, const Tensor& b) { mm(out, a, b, 0); });
}

// Backward's buffers; undefined output gradients count as zero.
struct BackwardState {
  Tensor dy;      // (T, B, H), contiguous
  Tensor dh, dc;  // (B, H) running gradients w.r.t. the state after the step (dc: LSTM)
  Tensor dG;      // (T, B, G·H) w.r.t. the input-projection pre-activations
  Tensor dGh;     // (T, B, G·H) w.r.t. the recurrent ones: GRU's own, else dG itself
  Tensor direct;  // (B, H) GRU: the z · dh part of dh_prev
};

inline BackwardState begin_backward(const RNNLayerInput& in, const Tensor& dy, const Tensor& dh_n, const Tensor& dc_n) {
  const int64_t T = in.x.size(0), B = in.x.size(1), H = in.w_hh.size(1), GH = rnn_gates(in.mode) * H;
  const bool lstm = in.mode == RNNMode::LSTM, gru = in.mode == RNNMode::GRU;
  const TensorOptions opt = in.x.options();
  BackwardState s;
  s.dy = dy.defined() ? dy.contiguous() : zeros({T, B, H}, opt);
  s.dh = dh_n.defined() ? dh_n.contiguous().clone() : zeros({B, H}, opt);
  if (lstm) s.dc = dc_n.defined() ? dc_n.contiguous().clone() : zeros({B, H}, opt);
  s.dG = empty({T, B, GH}, opt);
  s.dGh = gru ? empty({T, B, GH}, opt) : s.dG;
  if (gru) s.direct = empty({B, H}, opt);
  return s;
}

// Backward after the sweep: the input and weight gradients as three large GEMMs, each
// `gemm(out, a, b)`: out = a · b, and the bias gradients; dh0 and dc0 are the running
// gradients the sweep left.
template <typename Gemm>
RNNLayerGrads finish_backward(const RNNLayerInput& in, const RNNReserve& r, const BackwardState& s, const Gemm& gemm) {
  const int64_t T = in.x.size(0), B = in.x.size(1), I = in.x.size(2), H = in.w_hh.size(1);
  const int64_t GH = rnn_gates(in.mode) * H;
  const TensorOptions opt = in.x.options();
  const Tensor dG = s.dG.view({T * B, GH}), dGh = s.dGh.view({T * B, GH});
  RNNLayerGrads out;
  out.dx = empty({T, B, I}, opt);
  gemm(out.dx.view({T * B, I}), dG, in.w_ih);                          // dX (T·B, I) = dG (T·B, G·H) · W_ih (G·H, I)
  out.dw_ih = empty({GH, I}, opt);
  gemm(out.dw_ih, dG.t(), in.x.contiguous().view({T * B, I}));         // dW_ih (G·H, I) = dG^T · X
  out.dw_hh = empty({GH, H}, opt);
  gemm(out.dw_hh, dGh.t(), r.h_prev.view({T * B, H}));                 // dW_hh (G·H, H) = dGh^T · H_prev
  if (in.b_ih.defined()) {
    out.db_ih = empty({GH}, opt);
    reduce(ReduceOp::Sum, out.db_ih, dG, {0});
    if (in.mode == RNNMode::GRU) {
      out.db_hh = empty({GH}, opt);
      reduce(ReduceOp::Sum, out.db_hh, dGh, {0});
    } else {
      out.db_hh = out.db_ih.clone();
    }
  }
  out.dh0 = s.dh;
  out.dc0 = s.dc;
  return out;
}

inline bool is_16_bit(DType d) { return d == kBFloat16 || d == kFloat16; }

// t in dtype d (a copy; undefined stays undefined).
inline Tensor in_dtype(const Tensor& t, DType d) {
  if (!t.defined() || t.dtype() == d) return t;
  Tensor out = empty(t.sizes(), t.options().dtype(d));
  copy(out, t);
  return out;
}

inline RNNLayerInput widened(const RNNLayerInput& in) {
  RNNLayerInput f = in;
  for (Tensor* t : {&f.x, &f.h0, &f.c0, &f.w_ih, &f.w_hh, &f.b_ih, &f.b_hh}) *t = in_dtype(*t, kFloat32);
  return f;
}

// A 16-bit layer's forward (Note [16-bit recurrent layers]): `forward(widened input)` is
// the float32 algorithm; y, h_n and c_n come back in the layer's dtype.
template <typename Forward>
RNNLayerOutput forward_in_float32(const RNNLayerInput& in, const Forward& forward) {
  RNNLayerOutput out = forward(widened(in));
  for (Tensor* t : {&out.y, &out.h_n, &out.c_n}) *t = in_dtype(*t, in.x.dtype());
  return out;  // the reserve stays float32
}

// Its backward: `backward(widened input, dy, dh_n, dc_n)` in float32 on forward's float32
// reserve; every gradient comes back in the layer's dtype.
template <typename Backward>
RNNLayerGrads backward_in_float32(const RNNLayerInput& in, const Tensor& dy, const Tensor& dh_n, const Tensor& dc_n,
                                  const Backward& backward) {
  RNNLayerGrads g =
      backward(widened(in), in_dtype(dy, kFloat32), in_dtype(dh_n, kFloat32), in_dtype(dc_n, kFloat32));
  for (Tensor* t : {&g.dx, &g.dh0, &g.dc0, &g.dw_ih, &g.dw_hh, &g.db_ih, &g.db_hh}) *t = in_dtype(*t, in.x.dtype());
  return g;
}

}  // namespace loom::kernels::rnn_rules
