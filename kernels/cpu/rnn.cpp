// CPU whole-sequence recurrent layers (RNN tanh/relu, LSTM, GRU), forward and backward.
//
// Note [whole-sequence RNN kernels]
// A layer is not a chain of small autograd ops but one kernel per direction:
//   forward:  XP (T·B, G·H) = X (T·B, I) · W_ih^T + biases      one large GEMM
//             per step t: gates (B, G·H) += h (B, H) · W_hh^T    one GEMM per step
//                         the cell math, vectorised over the gate blocks
//   backward: per step (reverse order): the cell backward gives dG[t] (B, G·H), and
//             dh_prev (B, H) = dG[t] · W_hh                      one GEMM per step
//             then dW_ih = dG^T · X, dW_hh = dG^T · H_prev, dX = dG · W_ih, db = Σ dG
//                                                                 three large GEMMs
// The cells are kernels/rnn/rnn_math.h's over a whole row of units at once (Note [cell math
// over a run of units]), with Eigen's vectorised activations. Lengths, directions, biases
// and the reserve follow Note [recurrent layer rules] (kernels/rnn/rnn_rules.h), which also
// holds the GEMMs around the sweep, shared with the CUDA kernels.
//
// Note [16-bit recurrent layers on the CPU]
// A bfloat16 or float16 layer runs the float32 sweep on its inputs widened to float32 and
// rounds its outputs and gradients back once (Note [16-bit recurrent layers],
// kernels/rnn/rnn_rules.h). For bfloat16 every GEMM is the bfloat16 GEMM (Note [bfloat16
// GEMM]): its operands (x, h, the gate gradients, the weights) are rounded to bfloat16,
// the sums are float32, and W_hh is packed once per sweep, not per step. float16 keeps
// float32 GEMMs (correct, not fast).
#include <algorithm>
#include <cstring>

#include "core/deterministic.h"
#include "core/factories.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/rnn/rnn_layer_check.h"
#include "kernels/rnn/rnn_math.h"
#include "kernels/rnn/rnn_rules.h"

namespace loom::kernels {
namespace {

using rnn_rules::mm;

// Rows of a sweep's slice of the batch in deterministic mode (the GEMMs around the sweep take
// cpu::kDeterministicGemmBlock): fixed, not one slice per thread, so that every product
// multiplies the same rows, in the same order over K, at any thread count (Note
// [deterministic algorithms], core/deterministic.h). 16: a batch of 32 on two threads
// splits as it would anyway.
constexpr int64_t kDeterministicSweepRows = 16;

// fn(r0, r1) on each block of `rows` rows of [0, M), the blocks spread over the threads.
template <typename Fn>
void for_row_blocks(int64_t M, int64_t rows, Fn&& fn) {
  parallel_for(0, (M + rows - 1) / rows, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) fn(i * rows, std::min(M, (i + 1) * rows));
  });
}

// fn(r0, r1) on each thread's block of the rows [0, M) (fixed blocks in deterministic mode),
// under flush-to-zero (Note [denormals in recurrent backward]): the float32 GEMMs, the
// bfloat16 GEMM's float32 fallback among them, do not flush denormals themselves.
template <typename Fn>
void on_row_blocks(int64_t M, Fn&& fn) {
  const int64_t n = get_num_threads();
  const int64_t block =
      cpu::gemm_row_block(M, std::max<int64_t>(1, (M + n - 1) / n), are_deterministic_algorithms_enabled());
  for_row_blocks(M, block > 0 ? block : std::max<int64_t>(M, 1), [&](int64_t r0, int64_t r1) {
    const cpu::FlushDenormalsGuard ftz;
    fn(r0, r1);
  });
}

// out (M, N) = a (M, K) · b (K, N), the rows of out split across the threads.
void mm_flush_denormals(const Tensor& out, const Tensor& a, const Tensor& b) {
  on_row_blocks(out.size(0), [&](int64_t r0, int64_t r1) {
    mm(out.narrow(0, r0, r1 - r0), a.narrow(0, r0, r1 - r0), b, 0);
  });
}

// How a layer's GEMMs multiply (Note [16-bit recurrent layers on the CPU]).
enum class Gemms { Native, BFloat16 };

// A 2-D float32 tensor with one unit-stride dim as an operand of the bfloat16 GEMM.
cpu::Bf16Operand bf16_operand(const Tensor& t) {
  const bool row_major = t.stride(1) == 1 || t.size(1) == 1;
  LOOM_CHECK(row_major || t.stride(0) == 1 || t.size(0) == 1, ValueError,
             "rnn: internal: a GEMM operand of shape ", shape_str(t.sizes()), " has no unit stride");
  const int64_t ld = row_major ? (t.size(0) == 1 ? t.size(1) : t.stride(0)) : (t.size(1) == 1 ? t.size(0) : t.stride(1));
  return {cpu::MatrixRef{t.data(), ld, !row_major}, t.dtype()};
}

// b packed into `into` (a caller's thread_local, so that a training step's packs recur in
// the same memory).
const cpu::PackedBf16B& pack_bf16(const Tensor& b, cpu::PackedBf16B& into) {
  cpu::pack_bf16_b(bf16_operand(b), b.size(0), b.size(1), into);
  return into;
}

// out (M, N) (+)= a (M, K) · B on the bfloat16 GEMM, out float32 with unit column stride.
void mm_bf16(const Tensor& out, const Tensor& a, const cpu::PackedBf16B& b, bool accumulate) {
  cpu::gemm_bf16(out.size(0), bf16_operand(a), b, out.data_ptr<float>(), out.stride(0), accumulate);
}

// out (M, N) = a (M, K) · b (K, N) on the bfloat16 GEMM, b packed once and the rows of out
// split across the threads.
void mm_bf16_threads(const Tensor& out, const Tensor& a, const Tensor& b) {
  thread_local cpu::PackedBf16B reused;
  const cpu::PackedBf16B& packed = pack_bf16(b, reused);  // a reference: workers read this thread's
  on_row_blocks(out.size(0), [&](int64_t r0, int64_t r1) {
    mm_bf16(out.narrow(0, r0, r1 - r0), a.narrow(0, r0, r1 - r0), packed, false);
  });
}

// Backward's three large products on the bfloat16 GEMM. A weight gradient dW = dG^T · X
// (dG^T: a column-major A of T·B columns) runs as dW^T = X^T · dG, so that dG is packed as
// B, its rows in order and split across the threads, once for both dW_ih and dW_hh (LSTM
// and RNN multiply the same dG); dW^T is then copied into dW transposed. Lives for one
// backward: dG does not change while it does.
class Bf16BackwardProducts {
 public:
  explicit Bf16BackwardProducts(cpu::PackedBf16B& storage) : packed_(storage) {}

  void operator()(const Tensor& out, const Tensor& a, const Tensor& b) const {
    if (a.stride(0) != 1 || a.size(1) == 1) {  // a row-major A: as it is
      mm_bf16_threads(out, a, b);
      return;
    }
    const Tensor a_t = a.t();  // (K, M) row-major
    if (packed_from_ != a_t.data() || packed_sizes_ != a_t.sizes()) {
      pack_bf16(a_t, packed_);
      packed_from_ = a_t.data();
      packed_sizes_ = a_t.sizes();
    }
    const Tensor b_t = b.t();                                        // (N, K)
    Tensor out_t = empty({out.size(1), out.size(0)}, out.options());  // (N, M) = b^T · a^T
    on_row_blocks(out_t.size(0), [&](int64_t r0, int64_t r1) {
      mm_bf16(out_t.narrow(0, r0, r1 - r0), b_t.narrow(0, r0, r1 - r0), packed_, false);
    });
    copy(out, out_t.t());
  }

 private:
  cpu::PackedBf16B& packed_;
  mutable const void* packed_from_ = nullptr;
  mutable Shape packed_sizes_;
};

// Adds bias (N) to every row of the contiguous (M, N) matrix x.
template <typename S>
void add_rows(S* x, const S* bias, int64_t M, int64_t N) {
  parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / N), [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m)
      for (int64_t n = 0; n < N; ++n) x[m * N + n] += bias[n];
  });
}

// The cells' activations over a run of units (Note [cell math over a run of units]):
// Eigen's packet math, in place.
struct VectorActivations {
  template <typename S>
  void sigmoid(S* x, int64_t n) const {
    cpu::sigmoid_inplace(x, n);
  }
  template <typename S>
  void tanh(S* x, int64_t n) const {
    cpu::tanh_inplace(x, n);
  }
};

// Rows per thread when the batch is split evenly across the threads (a fixed count in
// deterministic mode); the whole batch (one thread) when the sweep is too small to pay for a
// parallel region.
int64_t rows_per_thread(int64_t B, int64_t work_per_row) {
  if (B * work_per_row < kParallelGrain) return B;
  if (are_deterministic_algorithms_enabled()) return kDeterministicSweepRows;
  const int64_t n = get_num_threads();
  return std::max<int64_t>(1, (B + n - 1) / n);
}

using Dims3 = RNNLayerDims;

template <typename S>
RNNLayerOutput forward_impl(const RNNLayerInput& in, const Dims3& d, Gemms gemms) {
  const auto [T, B, I, H, G] = d;
  const int64_t GH = G * H;
  const TensorOptions opt = in.x.options();
  const bool lstm = in.mode == RNNMode::LSTM, gru = in.mode == RNNMode::GRU;
  const bool relu = in.mode == RNNMode::RNN_RELU;
  const bool bf16 = gemms == Gemms::BFloat16;
  RNNLayerOutput out = rnn_rules::begin_forward(
      in, [](const Tensor& x, const Tensor& bias) { add_rows(x.data_ptr<S>(), bias.data_ptr<S>(), x.size(0), x.size(1)); },
      [bf16](const Tensor& o, const Tensor& a, const Tensor& b) {
        if (bf16) mm_bf16_threads(o, a, b);
        else mm(o, a, b, 0);
      });  // the input projection is in the gates
  const RNNReserve& r = out.reserve;
  const Tensor b_hh = rnn_rules::recurrent_bias(in);
  const rnn_rules::Lengths lengths = rnn_rules::layer_lengths(in);
  const Tensor w_hh_t = in.w_hh.t();  // (H, G·H)
  thread_local cpu::PackedBf16B reused;
  const cpu::PackedBf16B& w_hh_t_packed = bf16 ? pack_bf16(w_hh_t, reused) : reused;  // read by every worker
  S* hv = out.h_n.data_ptr<S>();      // (B, H) running state
  S* cv = lstm ? out.c_n.data_ptr<S>() : nullptr;

  // Batch rows never interact, so each thread runs the whole time loop for its own slice
  // of rows: no synchronisation per step, and each step's GEMM stays on its thread.
  for_row_blocks(B, rows_per_thread(B, T * GH * H), [&](int64_t b0, int64_t b1) {
    const cpu::FlushDenormalsGuard ftz;  // Note [denormals in recurrent backward]
    const int64_t nb = b1 - b0;
    Tensor gh = gru ? empty({nb, GH}, opt) : Tensor();  // (nb, G·H) W_hh h + b_hh
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = rnn_rules::step_time(s, T, in.reverse);
      Tensor hp = r.h_prev.select(0, t).narrow(0, b0, nb);  // (nb, H)
      S* hp_rows = hp.data_ptr<S>();
      std::memcpy(hp_rows, hv + b0 * H, size_t(nb * H) * sizeof(S));
      Tensor g_t = r.gates.select(0, t).narrow(0, b0, nb);  // (nb, G·H)
      if (gru) {
        if (bf16) mm_bf16(gh, hp, w_hh_t_packed, false);
        else mm(gh, hp, w_hh_t, 0);
        if (b_hh.defined()) add_rows(gh.data_ptr<S>(), b_hh.data_ptr<S>(), nb, GH);
      } else if (bf16) {
        mm_bf16(g_t, hp, w_hh_t_packed, true);
      } else {
        mm(g_t, hp, w_hh_t, 1);  // gates (nb, G·H) += h (nb, H) · W_hh^T (H, G·H)
      }
      S* gates_t = r.gates.select(0, t).data_ptr<S>();
      S* y = out.y.select(0, t).data_ptr<S>();
      S* c_prev_t = lstm ? r.c_prev.select(0, t).data_ptr<S>() : nullptr;
      S* tanh_c_t = lstm ? r.tanh_c.select(0, t).data_ptr<S>() : nullptr;
      S* gh_n_t = gru ? r.gh_n.select(0, t).data_ptr<S>() : nullptr;
      for (int64_t b = b0; b < b1; ++b) {
        S* g = gates_t + b * GH;
        if (!lengths.valid(b, t)) {
          rnn_rules::skip_forward(in.mode, g, gru ? gh_n_t + b * H : nullptr, H, H);
          continue;
        }
        S* hb = hv + b * H;
        S* yb = y + b * H;
        if (lstm) {
          S* cb = cv + b * H;
          S* cp = c_prev_t + b * H;
          std::copy(cb, cb + H, cp);
          rnn_math::LstmForward<S>()(VectorActivations(), g, cp, cb, tanh_c_t + b * H, hb, yb, H);
        } else if (gru) {
          rnn_math::GruForward<S>()(VectorActivations(), g, gh.data_ptr<S>() + (b - b0) * GH, hp_rows + (b - b0) * H,
                                    gh_n_t + b * H, hb, yb, H);
        } else {
          rnn_math::RnnForward<S>()(VectorActivations(), g, hb, yb, H, relu);
        }
      }
    }
  });
  return out;
}

template <typename S>
RNNLayerGrads backward_impl(const RNNLayerInput& in, const RNNReserve& r, const Tensor& dy_in,
                            const Tensor& dh_n, const Tensor& dc_n, const Dims3& d, Gemms gemms) {
  const auto [T, B, I, H, G] = d;
  const int64_t GH = G * H;
  const TensorOptions opt = in.x.options();
  const bool lstm = in.mode == RNNMode::LSTM, gru = in.mode == RNNMode::GRU;
  const bool relu = in.mode == RNNMode::RNN_RELU;
  const rnn_rules::BackwardState st = rnn_rules::begin_backward(in, dy_in, dh_n, dc_n);
  const rnn_rules::Lengths lengths = rnn_rules::layer_lengths(in);
  const bool bf16 = gemms == Gemms::BFloat16;
  thread_local cpu::PackedBf16B reused;
  const cpu::PackedBf16B& w_hh_packed = bf16 ? pack_bf16(in.w_hh, reused) : reused;  // read by every worker

  // As in forward, each thread sweeps the whole sequence for its slice of rows.
  for_row_blocks(B, rows_per_thread(B, T * GH * H), [&](int64_t b0, int64_t b1) {
    const cpu::FlushDenormalsGuard ftz;  // Note [denormals in recurrent backward]
    const int64_t nb = b1 - b0;
    Tensor dh_rec = empty({nb, H}, opt);  // (nb, H) dGh[t] · W_hh
    S* dhv = st.dh.data_ptr<S>();
    S* dcv = lstm ? st.dc.data_ptr<S>() : nullptr;
    S* direct_v = gru ? st.direct.data_ptr<S>() : nullptr;
    for (int64_t s = T - 1; s >= 0; --s) {
      const int64_t t = rnn_rules::step_time(s, T, in.reverse);
      const S* g_t = r.gates.select(0, t).data_ptr<S>();
      S* dG_t = st.dG.select(0, t).data_ptr<S>();
      S* dGh_t = st.dGh.select(0, t).data_ptr<S>();
      const S* dy_t = st.dy.select(0, t).data_ptr<S>();
      const S* c_prev_t = lstm ? r.c_prev.select(0, t).data_ptr<S>() : nullptr;
      const S* tanh_c_t = lstm ? r.tanh_c.select(0, t).data_ptr<S>() : nullptr;
      const S* h_prev_t = gru ? r.h_prev.select(0, t).data_ptr<S>() : nullptr;
      const S* gh_n_t = gru ? r.gh_n.select(0, t).data_ptr<S>() : nullptr;
      for (int64_t b = b0; b < b1; ++b) {
        const S* g = g_t + b * GH;
        S* dg = dG_t + b * GH;
        S* dgh = dGh_t + b * GH;
        S* dhb = dhv + b * H;
        if (!lengths.valid(b, t)) {
          rnn_rules::skip_backward(in.mode, dg, dgh, H, H);
          continue;
        }
        const S* dyb = dy_t + b * H;
        if (lstm) {
          const S* cp = c_prev_t + b * H;
          const S* tc = tanh_c_t + b * H;
          S* dcb = dcv + b * H;
          const rnn_math::LstmBackward<S> cell;
          for (int64_t j = 0; j < H; ++j)
            cell(dhb[j] + dyb[j], dcb[j], g[j], g[H + j], g[2 * H + j], g[3 * H + j], cp[j], tc[j], dg[j],
                 dg[H + j], dg[2 * H + j], dg[3 * H + j]);
        } else if (gru) {
          const S* hp = h_prev_t + b * H;
          const S* ghn = gh_n_t + b * H;
          S* dir = direct_v + b * H;
          const rnn_math::GruBackward<S> cell;
          for (int64_t j = 0; j < H; ++j) {
            cell(dhb[j] + dyb[j], g[j], g[H + j], g[2 * H + j], ghn[j], hp[j], dg[j], dg[H + j], dg[2 * H + j],
                 dgh[2 * H + j], dir[j]);
            dgh[j] = dg[j];
            dgh[H + j] = dg[H + j];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) dg[j] = rnn_math::rnn_activation_grad(dhb[j] + dyb[j], g[j], relu);
        }
      }
      // dh_prev (nb, H) = dGh[t] (nb, G·H) · W_hh (G·H, H); skipped rows keep their dh.
      if (bf16) mm_bf16(dh_rec, st.dGh.select(0, t).narrow(0, b0, nb), w_hh_packed, false);
      else mm(dh_rec, st.dGh.select(0, t).narrow(0, b0, nb), in.w_hh, 0);
      const S* rec = dh_rec.data_ptr<S>();
      for (int64_t b = b0; b < b1; ++b) {
        if (!lengths.valid(b, t)) continue;
        for (int64_t j = 0; j < H; ++j)
          dhv[b * H + j] = rec[(b - b0) * H + j] + (gru ? direct_v[b * H + j] : S(0));
      }
    }
  });
  if (bf16) {
    thread_local cpu::PackedBf16B storage;  // dG's pack, its memory reused by the next backward
    return rnn_rules::finish_backward(in, r, st, Bf16BackwardProducts(storage));
  }
  return rnn_rules::finish_backward(in, r, st, mm_flush_denormals);
}

}  // namespace

namespace cpu {
namespace {

// The router has checked the layer (kernels/rnn/rnn_layer_check.h).
Gemms gemms_of(DType d) { return d == kBFloat16 ? Gemms::BFloat16 : Gemms::Native; }

RNNLayerOutput rnn_layer_forward(const RNNLayerInput& in) {
  const Dims3 d = rnn_layer_dims(in);
  const DType dtype = in.x.dtype();
  if (rnn_rules::is_16_bit(dtype)) {  // Note [16-bit recurrent layers on the CPU]
    return rnn_rules::forward_in_float32(
        in, [&](const RNNLayerInput& f) { return forward_impl<float>(f, d, gemms_of(dtype)); });
  }
  return dispatch_floating(dtype, "rnn", [&]<typename S>() -> RNNLayerOutput {
    if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) return forward_impl<S>(in, d, Gemms::Native);
    else throw DTypeError("rnn: unsupported dtype");
  });
}

RNNLayerGrads rnn_layer_backward(const RNNLayerInput& in, const RNNReserve& reserve, const Tensor& dy,
                                 const Tensor& dh_n, const Tensor& dc_n) {
  const Dims3 d = rnn_layer_dims(in);
  const DType dtype = in.x.dtype();
  if (rnn_rules::is_16_bit(dtype)) {
    return rnn_rules::backward_in_float32(
        in, dy, dh_n, dc_n, [&](const RNNLayerInput& f, const Tensor& dy32, const Tensor& dh32, const Tensor& dc32) {
          return backward_impl<float>(f, reserve, dy32, dh32, dc32, d, gemms_of(dtype));
        });
  }
  return dispatch_floating(dtype, "rnn", [&]<typename S>() -> RNNLayerGrads {
    if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>)
      return backward_impl<S>(in, reserve, dy, dh_n, dc_n, d, Gemms::Native);
    else throw DTypeError("rnn: unsupported dtype");
  });
}

}  // namespace

void add_rnn_kernels(Backend& b) {
  b.rnn_layer_forward = &rnn_layer_forward;
  b.rnn_layer_backward = &rnn_layer_backward;
}

}  // namespace cpu
}  // namespace loom::kernels
