// CPU fused scaled-dot-product attention, forward and backward, float and double
// (Note [online softmax] in kernels/attention/attention_math.h).
//
// Note [attention tiles as GEMMs]
// For a tile of kRows query rows against kKeys keys the forward does two dense products
// and the backward five, each 2 · rows · keys · E flops, against rows · keys exps: the
// kernel is GEMM-bound. So each product is one call of the GEMM behind kernels::bmm
// (gemm.h: oneDNN's sgemm for float32, Eigen's for float64) on the operands' own rows, in place: a transposed operand (k_t^T, v_t^T, p^T, ds^T) is the same memory read as
// column-major, so nothing is copied. Between the products, row by row, run the online
// softmax (forward) or the weights and ds (backward), vectorised loops compiled per vector
// width (LOOM_CPU_CLONES). A task holds a (kRows, kKeys) tile of scores or two, never the
// (L, S) matrix; causal tiles wholly above the diagonal are never visited.
//
// Forward: one task per (n, tile of query rows), in parallel; it keeps each row's running
// max and sum and its (kRows, Ev) unnormalised output across the key tiles. With dropout
// (Note [attention dropout] in kernels/attention/attention_dropout.h) each tile of exponentials is
// added to the running sums first, then multiplied by its keep factors before the P V product.
// Backward (FlashAttention-2): one task per (n, run of key tiles). A run's dk and dv rows are
// its own; dq rows are shared by the runs of one n, so when n is split in runs (N is
// below 2 × the threads) every run but the first adds into its own (L, E) buffer, which is
// summed into dq after. With dropout the row loop between the products also applies the
// keep factors: ds from the undropped weights, dv from the dropped ones.
//
// The operands' rows are read where they are, (B, H, rows, cols) head views included (Note
// [attention head layouts] in kernels/attention/attention_layout.h).
//
// Note [16-bit attention on the CPU]
// bfloat16 operands (CPU autocast runs the op in bfloat16, as PyTorch lists it) stay
// bfloat16: every tile product runs on the bfloat16 GEMM (Note [bfloat16 GEMM]), whose
// float32 tiles (the weights p, the score gradients ds) are rounded to bfloat16 as they are
// packed, as PyTorch's CPU flash attention rounds them before its bfloat16 GEMMs. The sums,
// the softmax, lse and the gradient accumulators stay float32, and each output is rounded
// once. float16 (no float16 GEMM here) is widened to float32 once and runs the float32
// kernel. A bias is widened either way; a broadcast bias dim (stride 0) as one row, not
// materialised.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "core/deterministic.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "kernels/attention/attention_dropout.h"
#include "kernels/attention/attention_layout.h"
#include "kernels/attention/attention_math.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"

namespace loom::kernels::cpu {
namespace {

namespace am = attention_math;

// Tile sizes, measured (docs/benchmarks.md, SDPA): from 96 x 128 to 256 x 256 all run within
// a few per cent; smaller tiles lose to the GEMM's packing and call overhead. A float tile of
// scores is 128 KiB, so a backward task's two of them and its operand rows stay in L2.
constexpr int64_t kRows = 128;  // query rows per tile: the M of the score GEMM
constexpr int64_t kKeys = 256;  // keys per tile: its N

// The operands as raw pointers: q, k and v (and the backward's dout and out) of storage
// type In, T (float or double) or bfloat16 (T float, Note [16-bit attention on the CPU]);
// bias, in T, may be null: its rows laid out as lb, its column stride bs. dropout: whether
// weights are dropped by `keep`, the kept ones scaled by keep_scale.
template <typename T, typename In = T>
struct Operands {
  const In *q, *k, *v;
  RowLayout lq, lk, lv;
  const T* bias;
  RowLayout lb;
  int64_t N, L, S, E, Ev, bs;
  bool causal;
  T scale;
  bool dropout;
  attention_dropout::KeepMask keep;
  T keep_scale;  // 1 / (1 - p)
};

template <typename T, typename In = T>
Operands<T, In> operands(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal,
                         double scale, const AttentionDropout& dropout) {
  Operands<T, In> o{static_cast<const In*>(q.data()),
                    static_cast<const In*>(k.data()),
                    static_cast<const In*>(v.data()),
                    row_layout(q),
                    row_layout(k),
                    row_layout(v),
                    nullptr,
                    {},
                    attention_matrices(q), q.size(-2), k.size(-2), q.size(-1), v.size(-1), 0,
                    causal,
                    T(scale),
                    dropout.p > 0,
                    attention_dropout::keep_mask(dropout, k.size(-2)),
                    T(1.0 / (1.0 - dropout.p))};
  if (bias.defined()) {
    o.bias = static_cast<const T*>(bias.data());
    o.lb = row_layout(bias), o.bs = bias.stride(-1);
  }
  return o;
}

// ---- the tile products ----------------------------------------------------------------------

// The GEMM of float32 and float64 tiles (Note [GEMM dispatch] in gemm.h).
GemmFn tile_gemm() { return best_float_gemm(); }

// An operand of a tile product: a row-major block at p with row stride ld, as it is or read
// transposed, and its element type.
struct TileOperand {
  MatrixRef m;
  DType dtype;
};
template <typename In>
TileOperand rows_of(const In* p, int64_t ld) { return {{p, ld, false}, dtype_of<In>}; }
template <typename In>
TileOperand transposed(const In* p, int64_t ld) { return {{p, ld, true}, dtype_of<In>}; }

// c (M, N) = alpha a · b on the bfloat16 GEMM, or += a · b when accumulate (alpha 1): a float
// operand is rounded to bfloat16 as it is packed. B is packed per call, into this thread's
// buffer: (K, N) against the product's M K N multiply-adds.
void bf16_product(int64_t M, int64_t N, int64_t K, float alpha, const TileOperand& a, const TileOperand& b,
                  bool accumulate, float* c, int64_t ldc) {
  thread_local PackedBf16B packed;
  pack_bf16_b({b.m, b.dtype}, K, N, packed);
  gemm_bf16(M, {a.m, a.dtype}, packed, c, ldc, accumulate);
  if (alpha != 1.0f)
    for (int64_t i = 0; i < M; ++i) {
      float* ci = c + i * ldc;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) ci[j] *= alpha;
    }
}

// c (M, N), row-major with row stride ldc, = alpha a (M, K) · b (K, N) + beta c; beta is 0
// (c overwritten) or 1 (accumulated, alpha 1). Operands of type T run the float GEMM; a
// product with a bfloat16 operand (T float) runs the bfloat16 GEMM.
template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha, const TileOperand& a, const TileOperand& b, T beta, T* c,
          int64_t ldc) {
  if (K == 0) {  // an empty sum (E or Ev 0): no GEMM to call
    if (beta == T(0))
      for (int64_t i = 0; i < M; ++i) std::fill_n(c + i * ldc, N, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (a.dtype == kBFloat16 || b.dtype == kBFloat16) return bf16_product(M, N, K, alpha, a, b, beta == 1.0f, c, ldc);
  }
  GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = a.m, g.b = b.m;
  g.c = c, g.ldc = ldc;
  g.alpha = alpha, g.beta = beta;
  g.dtype = dtype_of<T>;
  tile_gemm()(g);
}

// ---- the row loops --------------------------------------------------------------------------

// s (rows, kKeys) += bias_ij for i in [i0, i0 + rows), j in [j0, j0 + cols), and -inf where
// causal hides the key; s holds scale q_i . k_j already. Tiles below the diagonal need no mask.
template <typename T, typename In>
inline void mask_tile(T* s, const Operands<T, In>& o, int64_t n, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  const bool crosses_diagonal = o.causal && j0 + cols - 1 > i0;
  if (!o.bias && !crosses_diagonal) return;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    T* sr = s + r * kKeys;
    if (o.bias) {
      const T* b = o.bias + o.lb.at(n, i) + j0 * o.bs;
      if (o.bs == 1) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) sr[c] += b[c];
      } else {
        for (int64_t c = 0; c < cols; ++c) sr[c] += b[c * o.bs];
      }
    }
    if (crosses_diagonal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < cols; ++c) sr[c] = am::minus_inf<T>();
  }
}

// z (cols) = the keep factors Z_ij of keys j0 .. j0 + cols - 1 (j0 a multiple of 4) of
// global query row g = n L + i: keep_scale where kept, 0 where dropped; z has room for cols
// rounded up to 4. The words are attention_dropout::keep_bits4's, Philox::block of each
// block of the row, but computed a round at a time over all the row's blocks: each round is
// then one vectorised loop (vpmuludq), about 4x faster than a block at a time, which made
// dropout cost as much as the rest of the op. The test "sdpa fused dropout keeps each
// weight with probability 1 - p, by its mask" holds the two to the same bits.
template <typename T, typename In>
inline void keep_factors(T* z, const Operands<T, In>& o, int64_t g, int64_t j0, int64_t cols) {
  constexpr int64_t kBlocks = kKeys / 4;
  uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];  // each block's counter, then its words
  const int64_t blocks = (cols + 3) / 4;
  const uint64_t first = attention_dropout::block_of(o.keep, g, j0);
  for (int64_t b = 0; b < blocks; ++b) {
    c0[b] = uint32_t(first + uint64_t(b)), c1[b] = uint32_t((first + uint64_t(b)) >> 32);
    c2[b] = c3[b] = 0;
  }
  uint32_t k0 = uint32_t(o.keep.seed), k1 = uint32_t(o.keep.seed >> 32);
  for (int round = 0; round < 10; ++round) {  // Philox4x32-10 (core/generator.h)
#pragma omp simd
    for (int64_t b = 0; b < blocks; ++b) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[b], p1 = uint64_t(0xCD9E8D57u) * c2[b];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[b] ^ k0, n2 = uint32_t(p0 >> 32) ^ c3[b] ^ k1;
      c1[b] = uint32_t(p1), c3[b] = uint32_t(p0), c0[b] = n0, c2[b] = n2;
    }
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  const uint32_t t = o.keep.threshold;
  const T kept = o.keep_scale;
#pragma omp simd
  for (int64_t b = 0; b < blocks; ++b) {
    z[4 * b] = c0[b] >= t ? kept : T(0), z[4 * b + 1] = c1[b] >= t ? kept : T(0);
    z[4 * b + 2] = c2[b] >= t ? kept : T(0), z[4 * b + 3] = c3[b] >= t ? kept : T(0);
  }
}

// Forward tasks [begin, end): task t is query tile t % tiles of n = t / tiles.
// out (N, L, Ev) laid out as lo, lse (N, L) contiguous.
template <typename T, typename In>
inline void forward_tasks(T* out, const RowLayout& lo, T* lse, const Operands<T, In>& o, int64_t begin,
                          int64_t end) {
  const int64_t L = o.L, S = o.S, E = o.E, Ev = o.Ev, tiles = (L + kRows - 1) / kRows;
  std::vector<T> s(size_t(kRows * kKeys)), acc(size_t(kRows * Ev)), z(size_t(o.dropout ? kKeys : 0));
  T m[kRows], l[kRows];
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n = t / tiles, i0 = (t % tiles) * kRows, rows = std::min(kRows, L - i0);
    std::fill_n(m, rows, am::minus_inf<T>());
    std::fill_n(l, rows, T(0));
    std::fill(acc.begin(), acc.end(), T(0));
    const In* qt = o.q + o.lq.at(n, i0);  // (rows, E)
    const int64_t keys = am::key_end(o.causal, i0 + rows - 1, S);
    for (int64_t j0 = 0; j0 < keys; j0 += kKeys) {
      const int64_t cols = std::min(kKeys, keys - j0);
      const In *kt = o.k + o.lk.at(n, j0), *vt = o.v + o.lv.at(n, j0);  // (cols, E), (cols, Ev)
      // s (rows, cols) = scale q_t (rows, E) · k_t^T (E, cols)
      gemm<T>(rows, cols, E, o.scale, rows_of(qt, o.lq.row_stride), transposed(kt, o.lk.row_stride), T(0), s.data(),
              kKeys);
      mask_tile(s.data(), o, n, i0, rows, j0, cols);
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
        if (alpha != T(1)) {
          T* ar = acc.data() + r * Ev;
#pragma omp simd
          for (int64_t d = 0; d < Ev; ++d) ar[d] *= alpha;
        }
      }
      if (o.dropout) {  // p_ij *= Z_ij, after the sums took p_ij (Note [attention dropout])
        for (int64_t r = 0; r < rows; ++r) {
          T* sr = s.data() + r * kKeys;
          keep_factors(z.data(), o, n * L + i0 + r, j0, cols);
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) sr[c] *= z[size_t(c)];
        }
      }
      // acc (rows, Ev) += p (rows, cols) · v_t (cols, Ev)
      gemm<T>(rows, Ev, cols, T(1), rows_of(s.data(), kKeys), rows_of(vt, o.lv.row_stride), T(1), acc.data(), Ev);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const T inv = am::inverse_sum(l[r]);
      T* out_row = out + lo.at(n, i0 + r);
      for (int64_t d = 0; d < Ev; ++d) out_row[d] = acc[size_t(r * Ev + d)] * inv;
      lse[n * L + i0 + r] = am::row_logsumexp(m[r], l[r]);
    }
  }
}

// The gradient buffers of backward_tasks, (N, L, E), (N, S, E), (N, S, Ev), zeroed first,
// and dq_runs: the ((runs - 1), N, L, E) dq buffers of the runs after the first, zeroed.
template <typename T, typename In = T>
struct Grads {
  T *dq, *dk, *dv, *dq_runs;
  const In *dout, *out;
  RowLayout ldq, ldk, ldv, ldout, lout;
  const T* lse;
  int64_t runs;  // runs of key tiles per n
};

// Backward tasks [begin, end): task t is run t % runs of the key tiles of n = t / runs
// (Note [online softmax]: the FlashAttention-2 backward).
template <typename T, typename In>
inline void backward_tasks(const Grads<T, In>& g, const Operands<T, In>& o, int64_t begin, int64_t end) {
  const int64_t N = o.N, L = o.L, S = o.S, E = o.E, Ev = o.Ev, key_tiles = (S + kKeys - 1) / kKeys;
  std::vector<T> p(size_t(kRows * kKeys)), ds(size_t(kRows * kKeys)), D(static_cast<size_t>(L));
  std::vector<T> z(size_t(o.dropout ? kKeys : 0));
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n = t / g.runs, run = t % g.runs;
    // dq (L, E) of this n, with row stride dq_ld
    T* dq = run == 0 ? g.dq + g.ldq.at(n, 0) : g.dq_runs + ((run - 1) * N + n) * L * E;
    const int64_t dq_ld = run == 0 ? g.ldq.row_stride : E;
    // D_i = dout_i . out_i  (L)
    for (int64_t i = 0; i < L; ++i) {
      const In *gi = g.dout + g.ldout.at(n, i), *oi = g.out + g.lout.at(n, i);
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < Ev; ++d) dot += T(gi[d]) * T(oi[d]);
      D[size_t(i)] = dot;
    }
    for (int64_t tile = run * key_tiles / g.runs; tile < (run + 1) * key_tiles / g.runs; ++tile) {
      const int64_t j0 = tile * kKeys, cols = std::min(kKeys, S - j0);
      const In *kt = o.k + o.lk.at(n, j0), *vt = o.v + o.lv.at(n, j0);  // (cols, E), (cols, Ev)
      T *dkt = g.dk + g.ldk.at(n, j0), *dvt = g.dv + g.ldv.at(n, j0);    // (cols, E), (cols, Ev)
      // Causal: rows i < j0 see none of these keys.
      for (int64_t i0 = o.causal ? j0 : 0; i0 < L; i0 += kRows) {
        const int64_t rows = std::min(kRows, L - i0);
        const In *qt = o.q + o.lq.at(n, i0), *gt = g.dout + g.ldout.at(n, i0);  // (rows, E), (rows, Ev)
        // p (rows, cols) = exp(scale q_t · k_t^T + bias - lse_i)
        gemm<T>(rows, cols, E, o.scale, rows_of(qt, o.lq.row_stride), transposed(kt, o.lk.row_stride), T(0), p.data(),
                kKeys);
        mask_tile(p.data(), o, n, i0, rows, j0, cols);
        for (int64_t r = 0; r < rows; ++r) {
          const T lse = g.lse[n * L + i0 + r];
          T* pr = p.data() + r * kKeys;
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) pr[c] = exp_nonpositive(pr[c] - lse);
        }
        // dp (rows, cols) = dout_t (rows, Ev) · v_t^T (Ev, cols)
        gemm<T>(rows, cols, Ev, T(1), rows_of(gt, g.ldout.row_stride), transposed(vt, o.lv.row_stride), T(0), ds.data(),
                kKeys);
        if (!o.dropout) {
          // ds_ij = scale p_ij (dp_ij - D_i), the scale folded in for dq and dk
          for (int64_t r = 0; r < rows; ++r) {
            const T Di = D[size_t(i0 + r)];
            const T* pr = p.data() + r * kKeys;
            T* dsr = ds.data() + r * kKeys;
#pragma omp simd
            for (int64_t c = 0; c < cols; ++c) dsr[c] = pr[c] * (dsr[c] - Di) * o.scale;
          }
        } else {
          // ds_ij = scale p_ij (Z_ij dp_ij - D_i), then p_ij *= Z_ij for dv (Note [attention dropout])
          for (int64_t r = 0; r < rows; ++r) {
            const T Di = D[size_t(i0 + r)];
            T* pr = p.data() + r * kKeys;
            T* dsr = ds.data() + r * kKeys;
            keep_factors(z.data(), o, n * L + i0 + r, j0, cols);
#pragma omp simd
            for (int64_t c = 0; c < cols; ++c) {
              dsr[c] = pr[c] * (z[size_t(c)] * dsr[c] - Di) * o.scale;
              pr[c] *= z[size_t(c)];
            }
          }
        }
        // dv_t (cols, Ev) += p^T (cols, rows) · dout_t (rows, Ev)
        gemm<T>(cols, Ev, rows, T(1), transposed(p.data(), kKeys), rows_of(gt, g.ldout.row_stride), T(1), dvt,
                g.ldv.row_stride);
        // dq_t (rows, E) += ds (rows, cols) · k_t (cols, E)
        gemm<T>(rows, E, cols, T(1), rows_of(ds.data(), kKeys), rows_of(kt, o.lk.row_stride), T(1), dq + i0 * dq_ld,
                dq_ld);
        // dk_t (cols, E) += ds^T (cols, rows) · q_t (rows, E)
        gemm<T>(cols, E, rows, T(1), transposed(ds.data(), kKeys), rows_of(qt, o.lq.row_stride), T(1), dkt,
                g.ldk.row_stride);
      }
    }
  }
}

// The float loops per x86 vector width (LOOM_CPU_CLONES); flatten inlines the templates.
LOOM_CPU_CLONES void forward_f32(float* out, const RowLayout& lo, float* lse, const Operands<float>& o, int64_t begin,
                                 int64_t end) {
  forward_tasks(out, lo, lse, o, begin, end);
}
LOOM_CPU_CLONES void backward_f32(const Grads<float>& g, const Operands<float>& o, int64_t begin, int64_t end) {
  backward_tasks(g, o, begin, end);
}
LOOM_CPU_CLONES void forward_bf16(float* out, const RowLayout& lo, float* lse, const Operands<float, BFloat16>& o,
                                  int64_t begin, int64_t end) {
  forward_tasks(out, lo, lse, o, begin, end);
}
LOOM_CPU_CLONES void backward_bf16(const Grads<float, BFloat16>& g, const Operands<float, BFloat16>& o, int64_t begin,
                                   int64_t end) {
  backward_tasks(g, o, begin, end);
}

template <typename T, typename In>
void forward_loops(T* out, const RowLayout& lo, T* lse, const Operands<T, In>& o, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<In, BFloat16>) forward_bf16(out, lo, lse, o, begin, end);
  else if constexpr (std::is_same_v<T, float>) forward_f32(out, lo, lse, o, begin, end);
  else forward_tasks(out, lo, lse, o, begin, end);
}
template <typename T, typename In>
void backward_loops(const Grads<T, In>& g, const Operands<T, In>& o, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<In, BFloat16>) backward_bf16(g, o, begin, end);
  else if constexpr (std::is_same_v<T, float>) backward_f32(g, o, begin, end);
  else backward_tasks(g, o, begin, end);
}

// Calls fn.template operator()<T, In>() for the operands' dtype: (float, float), (double,
// double) or (float, BFloat16); float16 is widened by the callers first.
template <typename F>
void dispatch_attention(DType dtype, const char* op, F&& fn) {
  LOOM_CHECK(dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16, DTypeError, op,
             ": the fused CPU kernel takes float32, float64 or bfloat16, got ", dtype_name(dtype));
  if (dtype == kFloat32) fn.template operator()<float, float>();
  else if (dtype == kFloat64) fn.template operator()<double, double>();
  else fn.template operator()<float, BFloat16>();
}

bool is_16bit(DType d) { return d == kBFloat16 || d == kFloat16; }

// t's values as float32, with t's sizes; a dim of stride 0 (broadcast) keeps stride 0, so
// it is converted once rather than per index.
Tensor widened(const Tensor& t) {
  if (!t.defined() || !is_16bit(t.dtype())) return t;
  Shape compact = t.sizes();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0) compact[d] = 1;
  Tensor w = empty(compact, t.options().dtype(kFloat32));
  copy(w, alias_with(t, compact, t.strides(), t.storage_offset()));
  Shape strides = w.strides();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0) strides[d] = 0;
  return alias_with(w, t.sizes(), strides, 0);
}

// A float32 buffer for a 16-bit output t (t itself otherwise).
Tensor float_output(const Tensor& t) { return is_16bit(t.dtype()) ? empty(t.sizes(), t.options().dtype(kFloat32)) : t; }

// The threads a parallel_for started here gets.
int64_t threads_here() { return in_parallel_region() ? 1 : get_num_threads(); }

// The threads the backward's split of keys into runs assumes in deterministic mode, whatever
// the count (Note [deterministic algorithms] in core/deterministic.h).
constexpr int64_t kDeterministicThreads = 8;

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const int64_t N = attention_matrices(q), L = q.size(-2);
  if (N == 0 || L == 0 || out.numel() == 0) return;
  if (q.dtype() == kFloat16) {  // Note [16-bit attention on the CPU]
    const Tensor out32 = float_output(out);
    cpu::attention_forward(out32, lse, widened(q), widened(k), widened(v), widened(bias), causal, scale, dropout);
    copy(out, out32);
    return;
  }
  const Tensor out_t = float_output(out), bias_t = widened(bias);  // float32 for bfloat16 operands
  dispatch_attention(q.dtype(), "scaled_dot_product_attention", [&]<typename T, typename In>() {
    const Operands<T, In> o = operands<T, In>(q, k, v, bias_t, causal, scale, dropout);
    T *op = static_cast<T*>(out_t.data()), *lp = static_cast<T*>(lse.data());
    const RowLayout lo = row_layout(out_t);
    // A task (a tile of rows against every key) is GEMM work enough for a chunk of its own.
    parallel_for(0, N * ((L + kRows - 1) / kRows), 1,
                 [&](int64_t begin, int64_t end) { forward_loops(op, lo, lp, o, begin, end); });
  });
  if (!out_t.is_same(out)) copy(out, out_t);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  if (q.dtype() == kFloat16) {  // Note [16-bit attention on the CPU]
    const Tensor dq32 = float_output(dq), dk32 = float_output(dk), dv32 = float_output(dv);
    cpu::attention_backward(dq32, dk32, dv32, widened(grad_out), widened(q), widened(k), widened(v), widened(out), lse,
                            widened(bias), causal, scale, dropout);
    copy(dq, dq32), copy(dk, dk32), copy(dv, dv32);
    return;
  }
  // float32 accumulators for bfloat16 gradients, rounded once at the end
  const Tensor dq_t = float_output(dq), dk_t = float_output(dk), dv_t = float_output(dv), bias_t = widened(bias);
  for (const Tensor* g : {&dq_t, &dk_t, &dv_t}) fill(*g, 0);  // the loops accumulate into them
  const int64_t N = attention_matrices(q), L = q.size(-2), S = k.size(-2), E = q.size(-1);
  if (N > 0 && L > 0 && S > 0) {
    dispatch_attention(q.dtype(), "scaled_dot_product_attention_backward", [&]<typename T, typename In>() {
      const Operands<T, In> o = operands<T, In>(q, k, v, bias_t, causal, scale, dropout);
      // Runs per n: enough tasks for two per thread, at most one per key tile. The runs' dq
      // are added after, so in deterministic mode their count follows a fixed thread count.
      const int64_t threads = are_deterministic_algorithms_enabled() ? kDeterministicThreads : threads_here();
      const int64_t runs = std::clamp<int64_t>((2 * threads + N - 1) / N, 1, (S + kKeys - 1) / kKeys);
      std::vector<T> dq_runs(size_t((runs - 1) * N * L * E), T(0));  // ((runs - 1), N, L, E)
      const Grads<T, In> g{static_cast<T*>(dq_t.data()),
                           static_cast<T*>(dk_t.data()),
                           static_cast<T*>(dv_t.data()),
                           dq_runs.data(),
                           static_cast<const In*>(grad_out.data()),
                           static_cast<const In*>(out.data()),
                           row_layout(dq_t),
                           row_layout(dk_t),
                           row_layout(dv_t),
                           row_layout(grad_out),
                           row_layout(out),
                           static_cast<const T*>(lse.data()),
                           runs};
      parallel_for(0, N * runs, 1, [&](int64_t begin, int64_t end) { backward_loops(g, o, begin, end); });
      if (runs == 1) return;
      // dq (N, L, E) += the dq of every later run, row by row ((n, i) = row / L, row % L)
      parallel_for(0, N * L, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(E, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       T* dst = g.dq + g.ldq.at(row / L, row % L);
                       for (int64_t run = 1; run < runs; ++run) {
                         const T* src = g.dq_runs + ((run - 1) * N * L + row) * E;
#pragma omp simd
                         for (int64_t d = 0; d < E; ++d) dst[d] += src[d];
                       }
                     }
                   });
    });
  }
  for (auto [grad, acc] : {std::pair{&dq, &dq_t}, std::pair{&dk, &dk_t}, std::pair{&dv, &dv_t}})
    if (!acc->is_same(*grad)) copy(*grad, *acc);
}

}  // namespace

std::string attention_refusal(const Tensor& q, const Tensor&) {
  if (is_floating_point(q.dtype())) return {};
  return std::string("the fused CPU kernel takes floating-point dtypes, got ") + dtype_name(q.dtype());
}

void add_attention_kernels(Backend& b) {
  b.attention_forward = &attention_forward;
  b.attention_backward = &attention_backward;
  b.attention_refusal = &attention_refusal;
}

}  // namespace loom::kernels::cpu
