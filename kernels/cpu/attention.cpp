// CPU fused scaled-dot-product attention, forward and backward, float and double
// (Note [online softmax] in kernels/attention_math.h).
//
// The forward runs one task per (n, tile of kRows query rows), in parallel; it visits the
// keys kKeys at a time, so a (kRows, kKeys) tile of scores and the (kRows, Ev) running
// output are all it holds. The backward runs one task per n (its dq, dk and dv belong to
// that task alone, so nothing is shared): for each tile of kKeys keys it recomputes the
// weights of every query row against it, adds to dk and dv of those keys and to dq.
// The inner loops run over contiguous memory: a tile's keys (and values) are transposed
// into (E, kKeys) scratch, so a row of scores is a sum of q_ie * k^T_e rows, which the
// compiler vectorises, as it does the rows of p v and of the gradient updates.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "kernels/attention_math.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/fast_exp.h"

namespace loom::kernels::cpu {
namespace {

namespace am = attention_math;

constexpr int64_t kRows = 16;  // query rows per tile
constexpr int64_t kKeys = 64;  // keys per tile: (kKeys, E) keys and values stay in L1/L2

// The operands as raw pointers; bias may be null, its strides (bn, bl, bs) of (N, L, S).
template <typename T>
struct Operands {
  const T *q, *k, *v, *bias;
  int64_t L, S, E, Ev, bn, bl, bs;
  bool causal;
  T scale;
};

template <typename T>
Operands<T> operands(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal,
                     double scale) {
  Operands<T> o{static_cast<const T*>(q.data()), static_cast<const T*>(k.data()), static_cast<const T*>(v.data()),
                nullptr, q.size(1), k.size(1), q.size(2), v.size(2), 0, 0, 0, causal, T(scale)};
  if (bias.defined()) {
    o.bias = static_cast<const T*>(bias.data());
    o.bn = bias.stride(0), o.bl = bias.stride(1), o.bs = bias.stride(2);
  }
  return o;
}

// xt (D, kKeys) = the rows [j0, j0 + cols) of x (S, D) transposed.
template <typename T>
void transpose_tile(T* xt, const T* x, int64_t j0, int64_t cols, int64_t D) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t d = 0; d < D; ++d) xt[d * kKeys + c] = x[(j0 + c) * D + d];
}

// s (rows, kKeys) = scale * q_i . k_j + bias_ij for i in [i0, i0 + rows), j in [j0, j0 + cols);
// -inf where causal hides the key. kt is the key tile transposed (E, kKeys).
template <typename T>
void score_tile(T* s, const Operands<T>& o, int64_t n, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                const T* kt) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    const T* qi = o.q + (n * o.L + i) * o.E;
    T* sr = s + r * kKeys;
    std::fill_n(sr, cols, T(0));
    for (int64_t e = 0; e < o.E; ++e) {
      const T qe = qi[e] * o.scale;
      const T* kte = kt + e * kKeys;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) sr[c] += qe * kte[c];
    }
    if (o.bias) {
      const T* b = o.bias + n * o.bn + i * o.bl + j0 * o.bs;
      for (int64_t c = 0; c < cols; ++c) sr[c] += b[c * o.bs];
    }
    if (o.causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < cols; ++c) sr[c] = am::minus_inf<T>();
  }
}

// Forward tasks [begin, end): task t is query tile t % tiles of n = t / tiles.
// out (N, L, Ev), lse (N, L).
template <typename T>
inline void forward_tasks(T* out, T* lse, const Operands<T>& o, int64_t begin, int64_t end) {
  const int64_t tiles = (o.L + kRows - 1) / kRows;
  std::vector<T> kt(size_t(o.E * kKeys)), s(size_t(kRows * kKeys)), acc(size_t(kRows * o.Ev));
  T m[kRows], l[kRows];
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n = t / tiles, i0 = (t % tiles) * kRows, rows = std::min(kRows, o.L - i0);
    std::fill_n(m, rows, am::minus_inf<T>());
    std::fill_n(l, rows, T(0));
    std::fill(acc.begin(), acc.end(), T(0));
    const int64_t keys = am::key_end(o.causal, i0 + rows - 1, o.S);
    for (int64_t j0 = 0; j0 < keys; j0 += kKeys) {
      const int64_t cols = std::min(kKeys, keys - j0);
      transpose_tile(kt.data(), o.k + n * o.S * o.E, j0, cols, o.E);
      score_tile(s.data(), o, n, i0, rows, j0, cols, kt.data());
      for (int64_t r = 0; r < rows; ++r) {
        T* sr = s.data() + r * kKeys;
        T tile_max = am::minus_inf<T>();
#pragma omp simd reduction(max : tile_max)
        for (int64_t c = 0; c < cols; ++c) tile_max = sr[c] > tile_max ? sr[c] : tile_max;
        const T m_new = std::max(m[r], tile_max), shift = am::safe_shift(m_new);
        const T alpha = am::rescale_factor(m[r], m_new);
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < cols; ++c) {
          sr[c] = exp_nonpositive(sr[c] - shift);  // p_ij, unnormalised
          sum += sr[c];
        }
        l[r] = l[r] * alpha + sum;
        m[r] = m_new;
        // acc_i (Ev) = alpha acc_i + sum_c p_ic v_c
        T* ar = acc.data() + r * o.Ev;
#pragma omp simd
        for (int64_t d = 0; d < o.Ev; ++d) ar[d] *= alpha;
        for (int64_t c = 0; c < cols; ++c) {
          const T p = sr[c];
          const T* vc = o.v + (n * o.S + j0 + c) * o.Ev;
#pragma omp simd
          for (int64_t d = 0; d < o.Ev; ++d) ar[d] += p * vc[d];
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = n * o.L + i0 + r;
      const T inv = am::inverse_sum(l[r]);
      for (int64_t d = 0; d < o.Ev; ++d) out[i * o.Ev + d] = acc[size_t(r * o.Ev + d)] * inv;
      lse[i] = am::row_logsumexp(m[r], l[r]);
    }
  }
}

// The gradient buffers of backward_tasks, (N, L, E), (N, S, E), (N, S, Ev), zeroed first.
template <typename T>
struct Grads {
  T *dq, *dk, *dv;
  const T *dout, *out, *lse;
};

// Backward of n in [begin, end) (Note [online softmax]: the FlashAttention-2 backward).
template <typename T>
inline void backward_tasks(const Grads<T>& g, const Operands<T>& o, int64_t begin, int64_t end) {
  const int64_t L = o.L, S = o.S, E = o.E, Ev = o.Ev;
  std::vector<T> kt(size_t(E * kKeys)), vt(size_t(Ev * kKeys)), p(size_t(kRows * kKeys)),
      ds(size_t(kRows * kKeys)), D(static_cast<size_t>(L));
  for (int64_t n = begin; n < end; ++n) {
    // D_i = dout_i . out_i  (L)
    for (int64_t i = 0; i < L; ++i) {
      const T *gi = g.dout + (n * L + i) * Ev, *oi = g.out + (n * L + i) * Ev;
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < Ev; ++d) dot += gi[d] * oi[d];
      D[size_t(i)] = dot;
    }
    for (int64_t j0 = 0; j0 < S; j0 += kKeys) {
      const int64_t cols = std::min(kKeys, S - j0);
      transpose_tile(kt.data(), o.k + n * S * E, j0, cols, E);
      transpose_tile(vt.data(), o.v + n * S * Ev, j0, cols, Ev);
      // Causal: rows i < j0 see none of these keys.
      for (int64_t i0 = o.causal ? j0 : 0; i0 < L; i0 += kRows) {
        const int64_t rows = std::min(kRows, L - i0);
        score_tile(p.data(), o, n, i0, rows, j0, cols, kt.data());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = n * L + i0 + r;
          const T lse = g.lse[i], Di = D[size_t(i - n * L)];
          const T* gi = g.dout + i * Ev;
          T *pr = p.data() + r * kKeys, *dsr = ds.data() + r * kKeys;
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) pr[c] = exp_nonpositive(pr[c] - lse);  // p_ij
          // dp_ij = dout_i . v_j, from the transposed value tile (Ev, kKeys)
          std::fill_n(dsr, cols, T(0));
          for (int64_t d = 0; d < Ev; ++d) {
            const T gd = gi[d];
            const T* vtd = vt.data() + d * kKeys;
#pragma omp simd
            for (int64_t c = 0; c < cols; ++c) dsr[c] += gd * vtd[c];
          }
          // ds_ij = p_ij (dp_ij - D_i), times scale for dq and dk
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) dsr[c] = pr[c] * (dsr[c] - Di) * o.scale;
          const T* qi = o.q + i * E;
          T* dqi = g.dq + i * E;
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t j = n * S + j0 + c;
            const T pc = pr[c], dsc = dsr[c];
            const T *kj = o.k + j * E;
            T *dkj = g.dk + j * E, *dvj = g.dv + j * Ev;
#pragma omp simd
            for (int64_t d = 0; d < Ev; ++d) dvj[d] += pc * gi[d];  // dv_j += p_ij dout_i
#pragma omp simd
            for (int64_t e = 0; e < E; ++e) {
              dqi[e] += dsc * kj[e];  // dq_i += scale ds_ij k_j
              dkj[e] += dsc * qi[e];  // dk_j += scale ds_ij q_i
            }
          }
        }
      }
    }
  }
}

// The float loops per x86 vector width (LOOM_CPU_CLONES); flatten inlines the templates.
LOOM_CPU_CLONES void forward_f32(float* out, float* lse, const Operands<float>& o, int64_t begin, int64_t end) {
  forward_tasks(out, lse, o, begin, end);
}
LOOM_CPU_CLONES void backward_f32(const Grads<float>& g, const Operands<float>& o, int64_t begin, int64_t end) {
  backward_tasks(g, o, begin, end);
}

// Tasks per parallel chunk so that a chunk does about kParallelGrain multiply-adds.
int64_t grain(int64_t work_per_task) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_task)); }

template <typename F>
void dispatch_attention(DType dtype, const char* op, F&& fn) {
  LOOM_CHECK(dtype == kFloat32 || dtype == kFloat64, DTypeError, op, ": the fused CPU kernel takes float32 or float64, got ",
             dtype_name(dtype));
  if (dtype == kFloat32) fn.template operator()<float>();
  else fn.template operator()<double>();
}

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& bias, bool causal, double scale) {
  const int64_t N = q.size(0), L = q.size(1);
  if (N == 0 || L == 0 || out.numel() == 0) return;
  dispatch_attention(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    const Operands<T> o = operands<T>(q, k, v, bias, causal, scale);
    T *op = static_cast<T*>(out.data()), *lp = static_cast<T*>(lse.data());
    const int64_t tasks = N * ((L + kRows - 1) / kRows);
    parallel_for(0, tasks, grain(kRows * o.S * (o.E + o.Ev)), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) forward_f32(op, lp, o, begin, end);
      else forward_tasks(op, lp, o, begin, end);
    });
  });
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& bias, bool causal, double scale) {
  for (const Tensor* g : {&dq, &dk, &dv}) fill(*g, 0);  // the loops accumulate into them
  const int64_t N = q.size(0);
  if (N == 0 || q.size(1) == 0 || k.size(1) == 0) return;
  dispatch_attention(q.dtype(), "scaled_dot_product_attention_backward", [&]<typename T>() {
    const Operands<T> o = operands<T>(q, k, v, bias, causal, scale);
    const Grads<T> g{static_cast<T*>(dq.data()),         static_cast<T*>(dk.data()),
                     static_cast<T*>(dv.data()),         static_cast<const T*>(grad_out.data()),
                     static_cast<const T*>(out.data()), static_cast<const T*>(lse.data())};
    parallel_for(0, N, grain(2 * o.L * o.S * (o.E + o.Ev)), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) backward_f32(g, o, begin, end);
      else backward_tasks(g, o, begin, end);
    });
  });
}

}  // namespace

void add_attention_kernels(Backend& b) {
  b.attention_forward = &attention_forward;
  b.attention_backward = &attention_backward;
}

}  // namespace loom::kernels::cpu
