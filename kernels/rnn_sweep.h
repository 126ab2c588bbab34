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
// as on the CPU. The gate math is kernels/rnn_math.h's (shared with the CPU), computed
// one unit at a time in opmath (float for 16-bit floats). Lengths follow the CPU kernel's packed-sequence
// semantics exactly; the reserve has the same layout (kernels::RNNReserve).
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
#include "kernels/rnn_math.h"

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
  const int64_t* lengths;  // (B) or null
  int64_t t, H;
  RNNMode mode;
};

template <typename T>
LOOM_HOST_DEVICE inline bool row_valid(const int64_t* lengths, int64_t t, int64_t b) {
  return lengths == nullptr || t < lengths[b];
}

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
    const int64_t G = p.mode == RNNMode::LSTM ? 4 : p.mode == RNNMode::GRU ? 3 : 1;
    T* g = p.gates + b * G * H;
    p.h_prev[i] = p.h[i];
    if (!row_valid<T>(p.lengths, p.t, b)) {  // state carried, gates and output zero
      for (int64_t k = 0; k < G; ++k) g[k * H + j] = T(0);
      if (p.mode == RNNMode::GRU) p.gh_n[i] = T(0);
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
  const int64_t* lengths;
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
    const int64_t G = p.mode == RNNMode::LSTM ? 4 : p.mode == RNNMode::GRU ? 3 : 1;
    const T* g = p.gates + b * G * H;
    T* dg = p.dG + b * G * H;
    if (!row_valid<T>(p.lengths, p.t, b)) {  // dh and dc pass through unchanged
      for (int64_t k = 0; k < G; ++k) dg[k * H + j] = T(0);
      if (p.mode == RNNMode::GRU) {
        T* dgh = p.dGh + b * G * H;
        for (int64_t k = 0; k < G; ++k) dgh[k * H + j] = T(0);
      }
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
      T* dgh = p.dGh + b * G * H;
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
  const int64_t* lengths;
  int64_t t, H;
  LOOM_HOST_DEVICE void operator()(int64_t i) const {
    if (!row_valid<T>(lengths, t, i / H)) return;
    using M = opmath_t<T>;
    dh[i] = T(M(dh_rec[i]) + (direct ? M(direct[i]) : M(0)));
  }
};

// out (M, N) = a (M, K) · b (K, N) + beta · out, on the tensors' device.
inline void mm(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  bmm(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), beta);
}

inline Tensor lengths_on(const RNNLayerInput& in) {
  if (in.lengths.empty()) return Tensor();
  return from_vector<int64_t>(in.lengths, {int64_t(in.lengths.size())}, TensorOptions(kInt64).device(in.x.device()));
}

template <typename T>
T* ptr_at(const Tensor& t, int64_t step) {  // the (B, ·) slab of a contiguous (T, B, ·) tensor
  return t.defined() ? t.select(0, step).data_ptr<T>() : nullptr;
}

template <typename T, typename Exec>
RNNLayerOutput forward(const RNNLayerInput& in, const Exec& exec) {
  const int64_t T_ = in.x.size(0), B = in.x.size(1), I = in.x.size(2), H = in.w_hh.size(1);
  const int64_t G = rnn_gates(in.mode), GH = G * H;
  const bool lstm = in.mode == RNNMode::LSTM, gru = in.mode == RNNMode::GRU;
  const TensorOptions opt = in.x.options();
  RNNLayerOutput out;
  RNNReserve& r = out.reserve;

  // XP (T·B, G·H) = X · W_ih^T + biases; LSTM and RNN fold b_hh in, GRU keeps it apart.
  r.gates = empty({T_, B, GH}, opt);
  mm(r.gates.view({T_ * B, GH}), in.x.contiguous().view({T_ * B, I}), in.w_ih.t(), 0);
  if (in.b_ih.defined()) r.gates.add_(gru ? in.b_ih : in.b_ih + in.b_hh);
  out.y = zeros({T_, B, H}, opt);
  r.h_prev = empty({T_, B, H}, opt);
  Tensor h = in.h0.contiguous().clone();  // (B, H)
  Tensor c = lstm ? in.c0.contiguous().clone() : Tensor();
  if (lstm) {
    r.c_prev = zeros({T_, B, H}, opt);
    r.tanh_c = zeros({T_, B, H}, opt);
  }
  Tensor gh = gru ? empty({B, GH}, opt) : Tensor();  // (B, G·H) W_hh h
  if (gru) r.gh_n = zeros({T_, B, H}, opt);
  const Tensor b_hh = gru && in.b_hh.defined() ? in.b_hh.contiguous() : Tensor();
  const Tensor lengths = lengths_on(in);
  const Tensor w_hh_t = in.w_hh.t();  // (H, G·H)

  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = in.reverse ? T_ - 1 - s : s;
    if (gru) mm(gh, h, w_hh_t, 0);
    else mm(r.gates.select(0, t), h, w_hh_t, 1);  // gates[t] += h · W_hh^T
    StepPointers<T> p{ptr_at<T>(r.gates, t), h.data_ptr<T>(), c.defined() ? c.data_ptr<T>() : nullptr,
                      ptr_at<T>(r.h_prev, t), ptr_at<T>(r.c_prev, t), ptr_at<T>(r.tanh_c, t),
                      gh.defined() ? gh.data_ptr<T>() : nullptr, b_hh.defined() ? b_hh.data_ptr<T>() : nullptr,
                      ptr_at<T>(r.gh_n, t), ptr_at<T>(out.y, t),
                      lengths.defined() ? lengths.data_ptr<int64_t>() : nullptr, t, H, in.mode};
    exec(B * H, ForwardStep<T>{p});
  }
  out.h_n = h;
  out.c_n = c;
  return out;
}

template <typename T, typename Exec>
RNNLayerGrads backward(const RNNLayerInput& in, const RNNReserve& r, const Tensor& dy_in, const Tensor& dh_n,
                       const Tensor& dc_n, const Exec& exec) {
  const int64_t T_ = in.x.size(0), B = in.x.size(1), I = in.x.size(2), H = in.w_hh.size(1);
  const int64_t G = rnn_gates(in.mode), GH = G * H;
  const bool lstm = in.mode == RNNMode::LSTM, gru = in.mode == RNNMode::GRU;
  const TensorOptions opt = in.x.options();
  const Tensor dy = dy_in.defined() ? dy_in.contiguous() : zeros({T_, B, H}, opt);
  Tensor dh = dh_n.defined() ? dh_n.contiguous().clone() : zeros({B, H}, opt);
  Tensor dc = lstm ? (dc_n.defined() ? dc_n.contiguous().clone() : zeros({B, H}, opt)) : Tensor();
  Tensor dG = empty({T_, B, GH}, opt);
  Tensor dGh = gru ? empty({T_, B, GH}, opt) : dG;
  Tensor direct = gru ? empty({B, H}, opt) : Tensor();
  Tensor dh_rec = empty({B, H}, opt);
  const Tensor lengths = lengths_on(in);
  const int64_t* lens = lengths.defined() ? lengths.data_ptr<int64_t>() : nullptr;

  for (int64_t s = T_ - 1; s >= 0; --s) {
    const int64_t t = in.reverse ? T_ - 1 - s : s;
    BackStepPointers<T> p{ptr_at<T>(r.gates, t), ptr_at<T>(dy, t), dh.data_ptr<T>(),
                          dc.defined() ? dc.data_ptr<T>() : nullptr, ptr_at<T>(dG, t), ptr_at<T>(dGh, t),
                          direct.defined() ? direct.data_ptr<T>() : nullptr, ptr_at<T>(r.c_prev, t),
                          ptr_at<T>(r.tanh_c, t), ptr_at<T>(r.h_prev, t), ptr_at<T>(r.gh_n, t), lens, t, H, in.mode};
    exec(B * H, BackwardStep<T>{p});
    mm(dh_rec, dGh.select(0, t), in.w_hh, 0);  // dh_rec (B, H) = dGh[t] (B, G·H) · W_hh (G·H, H)
    exec(B * H, FoldRecurrentGrad<T>{dh.data_ptr<T>(), dh_rec.data_ptr<T>(),
                                     direct.defined() ? direct.data_ptr<T>() : nullptr, lens, t, H});
  }

  RNNLayerGrads out;
  const Tensor dG2 = dG.view({T_ * B, GH}), dGh2 = dGh.view({T_ * B, GH});
  out.dx = empty({T_, B, I}, opt);
  mm(out.dx.view({T_ * B, I}), dG2, in.w_ih, 0);                                  // dX = dG · W_ih
  out.dw_ih = empty({GH, I}, opt);
  mm(out.dw_ih, dG2.t(), in.x.contiguous().view({T_ * B, I}), 0);                   // dW_ih = dG^T · X
  out.dw_hh = empty({GH, H}, opt);
  mm(out.dw_hh, dGh2.t(), r.h_prev.view({T_ * B, H}), 0);                            // dW_hh = dGh^T · H_prev
  if (in.b_ih.defined()) {
    out.db_ih = dG2.sum(0);
    out.db_hh = gru ? dGh2.sum(0) : out.db_ih.clone();
  }
  out.dh0 = dh;
  out.dc0 = dc;
  return out;
}

}  // namespace loom::kernels::rnn_sweep
