// A recurrent layer (one direction, whole sequence) as per-step elementwise functors
// between GEMMs: the GPU implementation of kernels::rnn_layer_forward/backward, written
// once for any "for each" executor so that the host tests run the very same algorithm.
//
// Note [step-functor RNN sweep]
// The CPU kernels (kernels/cpu/rnn.cpp) give each thread a slice of batch rows for the
// whole sequence. A GPU wants the opposite: every (row, unit) pair of one step in
// parallel, the steps in order on one stream. So each step is
//   forward:  gates[t] (B, G·H) += h (B, H) · W_hh^T         kernels::bmm (cuBLAS)
//             one fused cell functor over the B·H (row, unit) pairs
//   backward: one fused cell-backward functor over B·H pairs, giving dG[t]
//             dh_rec (B, H) = dGh[t] · W_hh                   kernels::bmm
//             one functor folding dh_rec into the running dh
// with the input projection and the weight gradients as large GEMMs around the sweep,
// as on the CPU (kernels/rnn/rnn_rules.h, which also holds the lengths, biases and reserve:
// Note [recurrent layer rules]). The gate math is kernels/rnn/rnn_math.h's, shared with the
// CPU, computed one unit at a time in opmath (float for 16-bit floats).
//
// An executor is `exec(n, f)`: call f(i) for every i in [0, n), ordered before any later
// kernel on the tensors' device (a host loop, or a grid-stride CUDA kernel on the current
// stream: kernels/cuda/rnn.cu).
#pragma once

#include <vector>

#include "core/dtype.h"
#include "core/factories.h"
#include "core/half.h"
#include "kernels/kernels.h"
#include "kernels/rnn/rnn_math.h"
#include "kernels/rnn/rnn_rules.h"

namespace loom::kernels::rnn_sweep {

// Pointers into the (T, B, ·) tensors at step t, and the running (B, H) states.
template <typename T>
struct StepPointers {
  T* gates;          // (B, G·H) at t: pre-activations in, activations out
  T* h;              // (B, H) running hidden state
  T* c;              // (B, H) running cell state (LSTM)
  T* h_prev;         // (B, H) reserve at t: h before the step
  T* c_prev;         // (B, H) reserve at t (LSTM)
  T* tanh_c;         // (B, H) reserve at t (LSTM)
  T* gh;             // (B, G·H) GRU: W_hh h, without b_hh
  const T* b_hh;     // (G·H) GRU, or null
  T* gh_n;           // (B, H) reserve at t (GRU): W_hn h + b_hn
  T* y;              // (B, H) output at t
  rnn_rules::Lengths lengths;
  int64_t t, H;
  RNNMode mode;
};

// The G gates of unit j of a (G·H) row, in opmath registers (Note [cell math over a run
// of units], n = 1): G is a constant, so the copies unroll and nothing goes to memory.
template <int G, typename T>
struct UnitGates {
  opmath_t<T> v[G];
  LOOM_HOST_DEVICE UnitGates(const T* g, int64_t H, int64_t j) {
    for (int k = 0; k < G; ++k) v[k] = opmath_t<T>(g[k * H + j]);
  }
  LOOM_HOST_DEVICE void store(T* g, int64_t H, int64_t j) const {
    for (int k = 0; k < G; ++k) g[k * H + j] = T(v[k]);
  }
};

// One (row, unit) pair of a forward step; i = b·H + j.
template <typename T>
struct ForwardStep {
  StepPointers<T> p;
  LOOM_HOST_DEVICE void operator()(int64_t i) const {
    using M = opmath_t<T>;
    const int64_t H = p.H, b = i / H, j = i % H;
    T* g = p.gates + b * rnn_gates(p.mode) * H;
    p.h_prev[i] = p.h[i];
    if (!p.lengths.valid(b, p.t)) {
      rnn_rules::skip_forward(p.mode, g + j, p.gh_n ? p.gh_n + i : nullptr, H, 1);
      return;
    }
    const rnn_math::ScalarActivations act;
    const M h_old = M(p.h[i]);
    M h_new;
    if (p.mode == RNNMode::LSTM) {
      UnitGates<4, T> gates(g, H, j);
      const M c_old = M(p.c[i]);
      M c_new, tc;
      rnn_math::LstmForward<M>()(act, gates.v, &c_old, &c_new, &tc, &h_new, &h_new, 1);
      gates.store(g, H, j);
      p.c_prev[i] = T(c_old);
      p.c[i] = T(c_new);
      p.tanh_c[i] = T(tc);
    } else if (p.mode == RNNMode::GRU) {
      UnitGates<3, T> gates(g, H, j);
      UnitGates<3, T> recurrent(p.gh + b * 3 * H, H, j);  // W_hh h, then + b_hh
      if (p.b_hh)
        for (int k = 0; k < 3; ++k) recurrent.v[k] += M(p.b_hh[k * H + j]);
      M hn;
      rnn_math::GruForward<M>()(act, gates.v, recurrent.v, &h_old, &hn, &h_new, &h_new, 1);
      gates.store(g, H, j);
      p.gh_n[i] = T(hn);
    } else {
      UnitGates<1, T> gates(g, H, j);
      rnn_math::RnnForward<M>()(act, gates.v, &h_new, &h_new, 1, p.mode == RNNMode::RNN_RELU);
      gates.store(g, H, j);
    }
    p.h[i] = p.y[i] = T(h_new);
  }
};

// Pointers for a backward step at t.
template <typename T>
struct BackStepPointers {
  const T* gates;    // (B, G·H) saved activations at t
  const T* dy;       // (B, H) at t
  T* dh;             // (B, H) running gradient w.r.t. the hidden state after step t
  T* dc;             // (B, H) running gradient w.r.t. the cell state (LSTM)
  T* dG;             // (B, G·H) at t: w.r.t. the input-projection pre-activations
  T* dGh;            // (B, G·H) at t: w.r.t. the recurrent ones (GRU; else == dG)
  T* direct;         // (B, H) GRU: the z · dh part of dh_prev
  const T* c_prev;   // (B, H) at t (LSTM)
  const T* tanh_c;   // (B, H) at t (LSTM)
  const T* h_prev;   // (B, H) at t (GRU)
  const T* gh_n;     // (B, H) at t (GRU)
  rnn_rules::Lengths lengths;
  int64_t t, H;
  RNNMode mode;
};

// The cell backward of one (row, unit) pair.
template <typename T>
struct BackwardStep {
  BackStepPointers<T> p;
  LOOM_HOST_DEVICE void operator()(int64_t i) const {
    using M = opmath_t<T>;
    const int64_t H = p.H, b = i / H, j = i % H;
    const int64_t G = rnn_gates(p.mode);
    const T* g = p.gates + b * G * H;
    T* dg = p.dG + b * G * H;
    T* dgh = p.dGh + b * G * H;
    if (!p.lengths.valid(b, p.t)) {
      rnn_rules::skip_backward(p.mode, dg + j, dgh + j, H, 1);
      return;
    }
    const M dh = M(p.dh[i]) + M(p.dy[i]);
    if (p.mode == RNNMode::LSTM) {
      M dc = M(p.dc[i]), di, df, dgg, do_;
      rnn_math::LstmBackward<M>()(dh, dc, M(g[j]), M(g[H + j]), M(g[2 * H + j]), M(g[3 * H + j]), M(p.c_prev[i]),
                                  M(p.tanh_c[i]), di, df, dgg, do_);
      p.dc[i] = T(dc);
      dg[j] = T(di), dg[H + j] = T(df), dg[2 * H + j] = T(dgg), dg[3 * H + j] = T(do_);
    } else if (p.mode == RNNMode::GRU) {
      M dxr, dxz, dxn, dhn, direct;
      rnn_math::GruBackward<M>()(dh, M(g[j]), M(g[H + j]), M(g[2 * H + j]), M(p.gh_n[i]), M(p.h_prev[i]), dxr, dxz,
                                 dxn, dhn, direct);
      dg[j] = dgh[j] = T(dxr);
      dg[H + j] = dgh[H + j] = T(dxz);
      dg[2 * H + j] = T(dxn);
      dgh[2 * H + j] = T(dhn);
      p.direct[i] = T(direct);
    } else {
      dg[j] = T(rnn_math::rnn_activation_grad(dh, M(g[j]), p.mode == RNNMode::RNN_RELU));
    }
  }
};

// dh (B, H) = dh_rec + direct for the rows valid at t; the others keep theirs.
template <typename T>
struct FoldRecurrentGrad {
  T* dh;
  const T* dh_rec;
  const T* direct;  // GRU, or null
  rnn_rules::Lengths lengths;
  int64_t t, H;
  LOOM_HOST_DEVICE void operator()(int64_t i) const {
    if (!lengths.valid(i / H, t)) return;
    using M = opmath_t<T>;
    dh[i] = T(M(dh_rec[i]) + (direct ? M(direct[i]) : M(0)));
  }
};

using rnn_rules::mm;

// The lengths on the input's device: device_lengths, or RNNLayerInput::lengths copied there
// (undefined without lengths).
inline Tensor lengths_on(const RNNLayerInput& in) {
  if (in.device_lengths.defined()) return in.device_lengths;
  if (in.lengths.empty()) return Tensor();
  return from_vector<int64_t>(in.lengths, {int64_t(in.lengths.size())}, TensorOptions(kInt64).device(in.x.device()));
}

inline rnn_rules::Lengths lengths_of(const Tensor& on_device, int64_t T) {
  return {on_device.defined() ? on_device.data_ptr<int64_t>() : nullptr, T};
}

template <typename T>
T* ptr_at(const Tensor& t, int64_t step) {  // the (B, ·) slab of a contiguous (T, B, ·) tensor
  return t.defined() ? t.select(0, step).data_ptr<T>() : nullptr;
}

template <typename T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

template <typename T, typename Exec>
RNNLayerOutput forward(const RNNLayerInput& in, const Exec& exec) {
  const int64_t T_ = in.x.size(0), B = in.x.size(1), H = in.w_hh.size(1);
  const int64_t GH = rnn_gates(in.mode) * H;
  const bool gru = in.mode == RNNMode::GRU;
  RNNLayerOutput out = rnn_rules::begin_forward(in, rnn_rules::add_to_rows);  // the input projection is in the gates
  const RNNReserve& r = out.reserve;
  const Tensor& h = out.h_n;  // (B, H) running state
  Tensor gh = gru ? empty({B, GH}, in.x.options()) : Tensor();  // (B, G·H) W_hh h
  const Tensor b_hh = rnn_rules::recurrent_bias(in);
  const Tensor lengths = lengths_on(in);
  const Tensor w_hh_t = in.w_hh.t();  // (H, G·H)

  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = rnn_rules::step_time(s, T_, in.reverse);
    if (gru) mm(gh, h, w_hh_t, 0);
    else mm(r.gates.select(0, t), h, w_hh_t, 1);  // gates[t] += h · W_hh^T
    StepPointers<T> p{ptr_at<T>(r.gates, t), h.data_ptr<T>(), ptr_or_null<T>(out.c_n), ptr_at<T>(r.h_prev, t),
                      ptr_at<T>(r.c_prev, t), ptr_at<T>(r.tanh_c, t), ptr_or_null<T>(gh), ptr_or_null<T>(b_hh),
                      ptr_at<T>(r.gh_n, t), ptr_at<T>(out.y, t), lengths_of(lengths, T_), t, H, in.mode};
    exec(B * H, ForwardStep<T>{p});
  }
  return out;
}

template <typename T, typename Exec>
RNNLayerGrads backward(const RNNLayerInput& in, const RNNReserve& r, const Tensor& dy, const Tensor& dh_n,
                       const Tensor& dc_n, const Exec& exec) {
  const int64_t T_ = in.x.size(0), B = in.x.size(1), H = in.w_hh.size(1);
  const rnn_rules::BackwardState st = rnn_rules::begin_backward(in, dy, dh_n, dc_n);
  Tensor dh_rec = empty({B, H}, in.x.options());
  const Tensor lengths = lengths_on(in);
  const rnn_rules::Lengths lens = lengths_of(lengths, T_);

  for (int64_t s = T_ - 1; s >= 0; --s) {
    const int64_t t = rnn_rules::step_time(s, T_, in.reverse);
    BackStepPointers<T> p{ptr_at<T>(r.gates, t), ptr_at<T>(st.dy, t), st.dh.data_ptr<T>(), ptr_or_null<T>(st.dc),
                          ptr_at<T>(st.dG, t), ptr_at<T>(st.dGh, t), ptr_or_null<T>(st.direct),
                          ptr_at<T>(r.c_prev, t), ptr_at<T>(r.tanh_c, t), ptr_at<T>(r.h_prev, t),
                          ptr_at<T>(r.gh_n, t), lens, t, H, in.mode};
    exec(B * H, BackwardStep<T>{p});
    mm(dh_rec, st.dGh.select(0, t), in.w_hh, 0);  // dh_rec (B, H) = dGh[t] (B, G·H) · W_hh (G·H, H)
    exec(B * H, FoldRecurrentGrad<T>{st.dh.data_ptr<T>(), dh_rec.data_ptr<T>(), ptr_or_null<T>(st.direct), lens,
                                     t, H});
  }
  return rnn_rules::finish_backward(in, r, st, [](const Tensor& out, const Tensor& a, const Tensor& b) {
    mm(out, a, b, 0);
  });
}

}  // namespace loom::kernels::rnn_sweep
