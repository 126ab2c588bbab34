// CUDA fused scaled-dot-product attention, forward and backward, for float32, float16 and
// bfloat16 (float32 accumulation) with head dims E, Ev up to 128: the FlashAttention-2
// schedule (Note [online softmax] in kernels/attention/attention_math.h) with the CPU kernels'
// semantics (kernels/cpu/attention.cpp): the same bias strides, causal alignment, rows with
// every key masked, and each row's logsumexp saved (float32) for the backward. Every
// operand, the gradients included, is read and written where it is, (B, H, rows, cols)
// head views too (Note [attention head layouts] in kernels/attention/attention_layout.h).
//
// Note [CUDA attention tiles]
// A block has kThreads = 256 threads (8 warps) and holds all its tiles in shared memory,
// zero-padded to the template head dim D (32, 64 or 128: the smallest that holds E and
// Ev) and to whole tiles, so no product reads past a tensor and the padding adds 0. The
// products are block_gemm calls: WMMA m16n16k16 on tensor cores (float32 accumulation) for
// float16 and bfloat16, a register-tiled loop on CUDA cores for float32. Their float
// accumulators stay in shared memory too, so rescaling a row of the output needs no
// knowledge of how a fragment spreads over a warp. R query rows and C keys per tile (Tiles).
//
// Forward: one block per (n, tile of R query rows). The Q tile stays; the keys pass in
// tiles of C (K and V), up to the diagonal when causal. Per key tile: S = Q K^T; then each
// query row's kThreads / R threads apply scale, bias and masks, fold the tile into the
// row's running max and sum (registers), write P = exp(S - max) in T and rescale the row's
// output accumulator; then O += P V. Last, out = O / sum and lse = max + log(sum).
// Backward: D = rowsum(dout * out) first (one warp per row), then one block per (n, tile of
// C keys), which keeps K, V and the float dK, dV accumulators and visits the query tiles
// of R rows (from the diagonal on when causal): S and dP = dout V^T, then P = exp(S - lse)
// and dS = scale P (dP - D), then dV += P^T dout, dK += dS^T Q and the tile's dQ = dS K,
// which is added with atomicAdd to a float32 (N, L, E) buffer: the key blocks of one n
// share every query row.
// Dropout (Note [attention dropout] in kernels/attention/attention_dropout.h): while a tile's operands
// load, the block draws the tile's keep bits into shared memory, one Philox block (a byte of
// 4 bits) per 4 keys of a row, the same bits as the CPU's; the forward multiplies each
// exponential by its keep factor after the row's sum took it, the backward forms
// dS = P (Z dP - D) and uses P Z for dV.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/cuda_graph.h"
#include "core/factories.h"
#include "kernels/attention/attention_dropout.h"
#include "kernels/attention/attention_layout.h"
#include "kernels/attention/attention_math.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"

namespace loom::kernels::cuda {
namespace {

namespace am = attention_math;

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kWarps = kThreads / kWarp;
constexpr int kMaxHeadDim = 128;

// ---- tile shapes and shared-memory layouts --------------------------------------------------

// Query rows and keys per tile, chosen so each layout below fits the 163 KiB of shared
// memory an sm_80 block may opt into (227 KiB on sm_90): float32 at D = 128 takes half as
// many keys.
template <typename T, int D>
struct Tiles {
  static constexpr bool kWide = sizeof(T) == 4 && D == 128;
  static constexpr int kForwardRows = 64, kForwardKeys = kWide ? 32 : 64;
  static constexpr int kBackwardRows = 32, kBackwardKeys = kWide ? 32 : 64;
};

// Row pitches (elements) of the tiles. WMMA needs a 16-bit row to be a multiple of 8
// elements and a float one of 4, and fragments 32-byte aligned: 16-bit operand tiles pad
// by 8 (16 bytes, which also shifts successive rows across the banks). The float32
// kernels use no WMMA, and their operand tiles pad by 1: an odd pitch spreads the column
// reads of the CUDA-core products over the banks. Float accumulators pad by 4 for every T
// (Note [accumulator rows are 16-byte aligned]).
//
// Note [accumulator rows are 16-byte aligned]
// A product with ACC reads its block of C and writes it back in the same barrier interval
// while the other threads do the same to their blocks. With an odd pitch a thread's row
// of 4 floats starts 4 bytes past a 16-byte boundary, and nvcc loaded it with one
// LDS.128 from that boundary (the element before the row, which the neighbouring thread
// owns and was writing) plus one LDS: a read it throws away, but a read-after-write race
// all the same, which compute-sanitizer's racecheck reported in attention_backward_kernel
// <float, 64> (the dk and dv accumulators; 2026-12-04, 960 hazards per query tile). With a
// pitch of a multiple of 4 every thread's 4 (or 2) columns start on a 16-byte (8-byte)
// boundary of its own, so each row is one exact LDS.128 (LDS.64): nothing outside the
// thread's block is read. It also makes the per-row loops over a tile conflict-free
// (the 8 rows of a warp start on 8 different banks).
template <typename T>
constexpr int tile_pitch(int cols) {
  return cols + (sizeof(T) == 2 ? 8 : 1);
}
constexpr int acc_pitch(int cols) { return cols + 4; }

// Regions of shared memory one after another, each 128-byte aligned: region i starts at
// at[i], and at[N] is the total.
template <size_t N>
struct Regions {
  size_t at[N + 1] = {};
  constexpr explicit Regions(const std::array<size_t, N>& bytes) {
    for (size_t i = 0; i < N; ++i) at[i + 1] = at[i] + (bytes[i] + 127) / 128 * 128;
  }
};

// The forward's tiles: q (R, D), k and v (C, D) of T; s (R, C) float; p (R, C) of T;
// o (R, D) float; each row's final max and sum (R floats each); the dropout keep bits
// (R, C / 4) bytes.
template <typename T, int D>
struct ForwardSmem {
  static constexpr int R = Tiles<T, D>::kForwardRows, C = Tiles<T, D>::kForwardKeys;
  static constexpr int kT = tile_pitch<T>(D), kP = tile_pitch<T>(C), kS = acc_pitch(C), kO = acc_pitch(D);
  enum Region { q, k, v, s, p, o, stats, keep, kRegions };
  static constexpr size_t t = sizeof(T), f = sizeof(float);
  static constexpr Regions<kRegions> regions{
      {t * R * kT, t * C * kT, t * C * kT, f * R * kS, t * R * kP, f * R * kO, f * 2 * R, size_t(R * C / 4)}};
  static constexpr size_t bytes = regions.at[kRegions];
};

// The backward's: k and v (C, D), q and dout (R, D) of T; s and dp (R, C) float; p and ds
// (R, C) of T; dk and dv (C, D), dq (R, D) float; each row's lse and D (R floats each);
// the dropout keep bits (R, C / 4) bytes.
template <typename T, int D>
struct BackwardSmem {
  static constexpr int R = Tiles<T, D>::kBackwardRows, C = Tiles<T, D>::kBackwardKeys;
  static constexpr int kT = tile_pitch<T>(D), kP = tile_pitch<T>(C), kS = acc_pitch(C), kO = acc_pitch(D);
  enum Region { k, v, q, dout, s, dp, p, ds, dk, dv, dq, stats, keep, kRegions };
  static constexpr size_t t = sizeof(T), f = sizeof(float);
  static constexpr Regions<kRegions> regions{{t * C * kT, t * C * kT, t * R * kT, t * R * kT, f * R * kS, f * R * kS,
                                              t * R * kP, t * R * kP, f * C * kO, f * C * kO, f * R * kO, f * 2 * R,
                                              size_t(R * C / 4)}};
  static constexpr size_t bytes = regions.at[kRegions];
};

// Region `region` of layout Smem's shared memory, as P* (its offset a compile-time constant).
template <typename P, typename Smem, int region>
__device__ inline P* carve(unsigned char* smem) {
  constexpr size_t offset = Smem::regions.at[region];
  return reinterpret_cast<P*>(smem + offset);
}

// ---- device helpers -------------------------------------------------------------------------

// The operands as raw pointers: q (N, L, E), k (N, S, E), v (N, S, Ev), their rows laid
// out as lq, lk, lv; bias null or (N, L, S), its rows laid out as lb and its column stride
// bs. dropout: whether weights are dropped by `keep`, the kept ones scaled by keep_scale =
// 1 / (1 - p).
template <typename T>
struct Inputs {
  const T *q, *k, *v, *bias;
  RowLayout lq, lk, lv, lb;
  int64_t L, S, E, Ev, bs;
  float scale;
  bool causal;
  bool dropout;
  attention_dropout::KeepMask keep;
  float keep_scale;
};

// Whether the products of T run on tensor cores (WMMA has bfloat16 from sm_80 on).
template <typename T>
constexpr bool use_wmma() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  return false;
#else
  return sizeof(T) == 2;
#endif
}

template <typename T>
using wmma_t = std::conditional_t<std::is_same_v<T, Half>, __half, __nv_bfloat16>;

// exp of a score minus the row's max or lse: the accurate expf for float32, whose results
// are held to the CPU's within 1e-5; the fast one where T's rounding dwarfs its error.
template <typename T>
__device__ inline float score_exp(float x) {
  if constexpr (std::is_same_v<T, float>) return expf(x);
  else return __expf(x);
}

// dst (ROWS, D), row pitch `pitch`, = src's rows [0, rows) and columns [0, cols) (row
// stride ld), zero elsewhere: the padding every product may read. 16 bytes a load when
// src's rows allow it (a 16-bit tile's rows are 16-byte aligned in shared memory too).
template <int ROWS, int D, typename T>
__device__ void load_tile(T* dst, int pitch, const T* src, int64_t ld, int64_t rows, int64_t cols) {
  constexpr int V = 16 / sizeof(T);
  using Vec = AlignedVector<T, V>;
  if (ld % V == 0 && cols % V == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int idx = threadIdx.x; idx < ROWS * (D / V); idx += kThreads) {
      const int r = idx / (D / V), c = idx % (D / V) * V;
      Vec x;
      if (r < rows && c < cols) x = *reinterpret_cast<const Vec*>(src + r * ld + c);
      else for (int e = 0; e < V; ++e) x.v[e] = T(0.0f);
      if constexpr (sizeof(T) == 2) *reinterpret_cast<Vec*>(dst + r * pitch + c) = x;
      else for (int e = 0; e < V; ++e) dst[r * pitch + c + e] = x.v[e];
    }
    return;
  }
  for (int idx = threadIdx.x; idx < ROWS * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    dst[r * pitch + c] = r < rows && c < cols ? src[r * ld + c] : T(0.0f);
  }
}

template <int ROWS, int COLS>
__device__ void zero_tile(float* dst, int pitch) {
  for (int idx = threadIdx.x; idx < ROWS * COLS; idx += kThreads) dst[(idx / COLS) * pitch + idx % COLS] = 0.0f;
}

// C (M, N), float, row pitch ldc, = (or += when ACC) A (M, K) · B (K, N) on the block's
// threads. A is read from a (M, K) row-major tile, or when AT from a (K, M) one (A^T
// stored); B from a (K, N) tile, or when BT from a (N, K) one. K is a multiple of 16 and
// M, N of 32. Each thread or warp owns whole blocks of C, so a C element has one writer.
template <int M, int N, bool AT, bool BT, bool ACC, typename T>
__device__ void block_gemm(float* c, int ldc, const T* a, int lda, const T* b, int ldb, int K) {
  if constexpr (use_wmma<T>()) {
    namespace w = nvcuda::wmma;
    using W = wmma_t<T>;
    using LayoutA = std::conditional_t<AT, w::col_major, w::row_major>;
    using LayoutB = std::conditional_t<BT, w::col_major, w::row_major>;
    const W* aw = reinterpret_cast<const W*>(a);
    const W* bw = reinterpret_cast<const W*>(b);
    constexpr int kBlocksN = N / 16;
    for (int f = threadIdx.x / kWarp; f < (M / 16) * kBlocksN; f += kWarps) {
      const int i0 = (f / kBlocksN) * 16, j0 = (f % kBlocksN) * 16;
      w::fragment<w::accumulator, 16, 16, 16, float> acc;
      if constexpr (ACC) w::load_matrix_sync(acc, c + i0 * ldc + j0, ldc, w::mem_row_major);
      else w::fill_fragment(acc, 0.0f);
      for (int k0 = 0; k0 < K; k0 += 16) {
        w::fragment<w::matrix_a, 16, 16, 16, W, LayoutA> fa;
        w::fragment<w::matrix_b, 16, 16, 16, W, LayoutB> fb;
        w::load_matrix_sync(fa, AT ? aw + k0 * lda + i0 : aw + i0 * lda + k0, lda);
        w::load_matrix_sync(fb, BT ? bw + j0 * ldb + k0 : bw + k0 * ldb + j0, ldb);
        w::mma_sync(acc, fa, fb, acc);
      }
      w::store_matrix_sync(c + i0 * ldc + j0, acc, ldc, w::mem_row_major);
    }
  } else {
    constexpr int TM = M * N >= 16 * kThreads ? 4 : 2, TN = TM;  // each thread's block of C
    constexpr int kBlocksN = N / TN;
    for (int t = threadIdx.x; t < (M / TM) * kBlocksN; t += kThreads) {
      const int i0 = (t / kBlocksN) * TM, j0 = (t % kBlocksN) * TN;
      float acc[TM][TN];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = ACC ? c[(i0 + i) * ldc + j0 + j] : 0.0f;
      for (int kk = 0; kk < K; ++kk) {
        float av[TM], bv[TN];
        for (int i = 0; i < TM; ++i) av[i] = float(AT ? a[kk * lda + i0 + i] : a[(i0 + i) * lda + kk]);
        for (int j = 0; j < TN; ++j) bv[j] = float(BT ? b[(j0 + j) * ldb + kk] : b[kk * ldb + j0 + j]);
        for (int i = 0; i < TM; ++i)
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) c[(i0 + i) * ldc + j0 + j] = acc[i][j];
    }
  }
}

// The max or sum of v over each group of G consecutive lanes (G a power of 2 up to 32),
// returned to all of them: the shared group_reduce of kernels/cuda/block_reduce.cuh.
template <int G>
__device__ inline float group_max(float v) {
  return group_reduce<G>(v, [](float a, float b) { return fmaxf(a, b); });
}
template <int G>
__device__ inline float group_sum(float v) {
  return group_reduce<G>(v, Add{});
}

// s (= scale q_i . k_j) + bias_ij of query i, key j, or -inf where the key is hidden:
// outside the tile (a padding row or column) or above the causal diagonal. bias_n: the
// bias of this block's n (its row 0), or null.
template <typename T>
__device__ inline float masked_score(const Inputs<T>& in, const T* bias_n, float s, int64_t i, int64_t j,
                                     bool outside) {
  if (outside || am::causal_hidden(in.causal, i, j)) return am::minus_inf<float>();
  s *= in.scale;
  if (bias_n) s += float(bias_n[i * in.lb.row_stride + j * in.bs]);
  return s;
}

// keep (R, C / 4) = the keep bits of the tile of query rows i0 .. i0 + R - 1 and keys
// j0 .. j0 + C - 1 of n, bit e of byte (r, c / 4) for key j0 + c + e (Note [attention
// dropout]): one Philox block per byte. Padding rows and keys draw bits nobody reads.
template <int R, int C, typename T>
__device__ void draw_keep_bits(unsigned char* keep, const Inputs<T>& in, int64_t n, int64_t i0, int64_t j0) {
  for (int idx = threadIdx.x; idx < R * (C / 4); idx += kThreads) {
    const int r = idx / (C / 4), c = idx % (C / 4) * 4;
    keep[idx] = static_cast<unsigned char>(attention_dropout::keep_bits4(in.keep, n * in.L + i0 + r, j0 + c));
  }
}

// Z of row r, key c of the tile: keep_scale where kept, 0 where dropped.
template <int C, typename T>
__device__ inline float keep_factor(const unsigned char* keep, const Inputs<T>& in, int r, int c) {
  return keep[r * (C / 4) + c / 4] >> (c % 4) & 1 ? in.keep_scale : 0.0f;
}

// ---- kernels --------------------------------------------------------------------------------

// Forward (Note [CUDA attention tiles]): out (N, L, Ev) of T, its rows laid out as lo, lse
// (N, L) float. Block b takes n = b / tiles and, last query tile first (the longest when
// causal), tile tiles - 1 - b % tiles.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(Inputs<T> in, T* out, RowLayout lo, float* lse) {
  using Smem = ForwardSmem<T, D>;
  constexpr int R = Smem::R, C = Smem::C, G = kThreads / R;  // G threads per query row
  extern __shared__ __align__(128) unsigned char smem[];
  T *sq = carve<T, Smem, Smem::q>(smem), *sk = carve<T, Smem, Smem::k>(smem), *sv = carve<T, Smem, Smem::v>(smem);
  T* sp = carve<T, Smem, Smem::p>(smem);
  float *ss = carve<float, Smem, Smem::s>(smem), *so = carve<float, Smem, Smem::o>(smem);
  float *sm = carve<float, Smem, Smem::stats>(smem), *sl = sm + R;
  unsigned char* skeep = carve<unsigned char, Smem, Smem::keep>(smem);

  const int64_t tiles = (in.L + R - 1) / R;
  const int64_t n = blockIdx.x / tiles, i0 = (tiles - 1 - blockIdx.x % tiles) * R;
  const int64_t rows = std::min<int64_t>(R, in.L - i0);
  const int ek = int((in.E + 15) / 16 * 16);  // the inner size of q k^T, padded with zeros
  const T* bias_n = in.bias ? in.bias + in.lb.at(n, 0) : nullptr;

  load_tile<R, D>(sq, Smem::kT, in.q + in.lq.at(n, i0), in.lq.row_stride, rows, in.E);
  zero_tile<R, D>(so, Smem::kO);
  const int r = threadIdx.x / G, part = threadIdx.x % G;  // this thread's row and share of it
  float m = am::minus_inf<float>(), l = 0.0f;             // the row's running max and sum
  const int64_t keys = am::key_end(in.causal, i0 + rows - 1, in.S);
  for (int64_t j0 = 0; j0 < keys; j0 += C) {
    const int64_t cols = std::min<int64_t>(C, keys - j0);
    __syncthreads();  // the last tile's products are done with sk, sv and sp
    load_tile<C, D>(sk, Smem::kT, in.k + in.lk.at(n, j0), in.lk.row_stride, cols, in.E);
    load_tile<C, D>(sv, Smem::kT, in.v + in.lv.at(n, j0), in.lv.row_stride, cols, in.Ev);
    if (in.dropout) draw_keep_bits<R, C>(skeep, in, n, i0, j0);
    __syncthreads();
    block_gemm<R, C, false, true, false>(ss, Smem::kS, sq, Smem::kT, sk, Smem::kT, ek);  // s (R, C) = q k^T
    __syncthreads();
    // The online softmax of row r over this tile (Note [online softmax]).
    float* sr = ss + r * Smem::kS;
    float tile_max = am::minus_inf<float>();
    for (int c = part; c < C; c += G) {
      sr[c] = masked_score(in, bias_n, sr[c], i0 + r, j0 + c, r >= rows || c >= cols);
      tile_max = fmaxf(tile_max, sr[c]);
    }
    const float m_new = fmaxf(m, group_max<G>(tile_max));
    const float shift = am::safe_shift(m_new), alpha = am::rescale_factor(m, m_new);
    float sum = 0.0f;
    for (int c = part; c < C; c += G) {
      const float e = score_exp<T>(sr[c] - shift);  // p_ij, unnormalised
      sp[r * Smem::kP + c] = T(in.dropout ? e * keep_factor<C>(skeep, in, r, c) : e);  // p_ij Z_ij for the product
      sum += e;
    }
    l = l * alpha + group_sum<G>(sum);
    m = m_new;
    if (alpha != 1.0f)  // the max rose: rescale the row's output so far
      for (int c = part; c < D; c += G) so[r * Smem::kO + c] *= alpha;
    __syncthreads();
    block_gemm<R, D, false, false, true>(so, Smem::kO, sp, Smem::kP, sv, Smem::kT, C);  // o (R, D) += p v
  }
  if (part == 0) sm[r] = m, sl[r] = l;
  __syncthreads();
  T* out_n = out + lo.at(n, 0);
  for (int idx = threadIdx.x; idx < rows * in.Ev; idx += kThreads) {
    const int64_t rr = idx / in.Ev, c = idx % in.Ev;
    out_n[(i0 + rr) * lo.row_stride + c] = T(so[rr * Smem::kO + c] * am::inverse_sum(sl[rr]));
  }
  if (threadIdx.x < rows) lse[n * in.L + i0 + threadIdx.x] = am::row_logsumexp(sm[threadIdx.x], sl[threadIdx.x]);
}

// d (N L) = sum_c dout_ic out_ic over the N L rows of Ev (D_i of Note [online softmax]),
// row g = n L + i laid out as ldout and lout; one warp per row.
template <typename T>
__global__ void __launch_bounds__(kBlockSize) row_dot_kernel(float* d, const T* dout, RowLayout ldout, const T* out,
                                                             RowLayout lout, int64_t rows, int64_t L, int64_t Ev) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarp;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; row < rows; row += warps) {
    const T *dr = dout + ldout.at(row / L, row % L), *orow = out + lout.at(row / L, row % L);
    float acc = 0.0f;
    for (int64_t c = lane; c < Ev; c += kWarp) acc += float(dr[c]) * float(orow[c]);
    acc = group_sum<kWarp>(acc);
    if (lane == 0) d[row] = acc;
  }
}

// The backward's other operands: dout (N, L, Ev) of T; lse and D (N, L) float; dq_acc
// (N, L, E) float, zeroed, added to; dk (N, S, E) and dv (N, S, Ev) of T, overwritten; each
// (N, rows, cols) one's rows laid out as its RowLayout says.
template <typename T>
struct Grads {
  const T* dout;
  const float *lse, *rowdot;
  float* dq_acc;
  T *dk, *dv;
  RowLayout ldout, ldq, ldk, ldv;
};

// Backward (Note [CUDA attention tiles]): block b takes n = b / tiles and key tile b % tiles.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_backward_kernel(Inputs<T> in, Grads<T> g) {
  using Smem = BackwardSmem<T, D>;
  constexpr int R = Smem::R, C = Smem::C;
  extern __shared__ __align__(128) unsigned char smem[];
  T *sk = carve<T, Smem, Smem::k>(smem), *sv = carve<T, Smem, Smem::v>(smem);
  T *sq = carve<T, Smem, Smem::q>(smem), *sdo = carve<T, Smem, Smem::dout>(smem);
  T *sp = carve<T, Smem, Smem::p>(smem), *sds = carve<T, Smem, Smem::ds>(smem);
  float *ss = carve<float, Smem, Smem::s>(smem), *sdp = carve<float, Smem, Smem::dp>(smem);
  float *sdk = carve<float, Smem, Smem::dk>(smem), *sdv = carve<float, Smem, Smem::dv>(smem);
  float *sdq = carve<float, Smem, Smem::dq>(smem);
  float *slse = carve<float, Smem, Smem::stats>(smem), *sd = slse + R;
  unsigned char* skeep = carve<unsigned char, Smem, Smem::keep>(smem);

  const int64_t tiles = (in.S + C - 1) / C;
  const int64_t n = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * C;
  const int64_t cols = std::min<int64_t>(C, in.S - j0);
  const int ek = int((in.E + 15) / 16 * 16), evk = int((in.Ev + 15) / 16 * 16);
  const T* bias_n = in.bias ? in.bias + in.lb.at(n, 0) : nullptr;
  float* dq_n = g.dq_acc + g.ldq.at(n, 0);

  load_tile<C, D>(sk, Smem::kT, in.k + in.lk.at(n, j0), in.lk.row_stride, cols, in.E);
  load_tile<C, D>(sv, Smem::kT, in.v + in.lv.at(n, j0), in.lv.row_stride, cols, in.Ev);
  zero_tile<C, D>(sdk, Smem::kO);
  zero_tile<C, D>(sdv, Smem::kO);
  // Causal: rows i < j0 see none of these keys.
  for (int64_t i0 = in.causal ? j0 : 0; i0 < in.L; i0 += R) {
    const int64_t rows = std::min<int64_t>(R, in.L - i0);
    __syncthreads();  // the last tile's products and dq adds are done with sq, sdo, sp, sds, sdq
    load_tile<R, D>(sq, Smem::kT, in.q + in.lq.at(n, i0), in.lq.row_stride, rows, in.E);
    load_tile<R, D>(sdo, Smem::kT, g.dout + g.ldout.at(n, i0), g.ldout.row_stride, rows, in.Ev);
    if (threadIdx.x < R) {
      const bool real = threadIdx.x < rows;  // a padding row: lse +inf makes its weights 0
      slse[threadIdx.x] = real ? g.lse[n * in.L + i0 + threadIdx.x] : std::numeric_limits<float>::infinity();
      sd[threadIdx.x] = real ? g.rowdot[n * in.L + i0 + threadIdx.x] : 0.0f;
    }
    if (in.dropout) draw_keep_bits<R, C>(skeep, in, n, i0, j0);
    __syncthreads();
    block_gemm<R, C, false, true, false>(ss, Smem::kS, sq, Smem::kT, sk, Smem::kT, ek);     // s (R, C) = q k^T
    block_gemm<R, C, false, true, false>(sdp, Smem::kS, sdo, Smem::kT, sv, Smem::kT, evk);  // dp (R, C) = dout v^T
    __syncthreads();
    for (int idx = threadIdx.x; idx < R * C; idx += kThreads) {
      const int r = idx / C, c = idx % C;
      const float s = masked_score(in, bias_n, ss[r * Smem::kS + c], i0 + r, j0 + c, r >= rows || c >= cols);
      const float p = score_exp<T>(s - slse[r]);  // 0 where masked, and in a row with every key masked
      const float z = in.dropout ? keep_factor<C>(skeep, in, r, c) : 1.0f;  // Note [attention dropout]
      sp[r * Smem::kP + c] = T(p * z);
      sds[r * Smem::kP + c] = T(p * (z * sdp[r * Smem::kS + c] - sd[r]) * in.scale);  // ds_ij, times scale
    }
    __syncthreads();
    block_gemm<C, D, true, false, true>(sdv, Smem::kO, sp, Smem::kP, sdo, Smem::kT, R);   // dv (C, D) += p^T dout
    block_gemm<C, D, true, false, true>(sdk, Smem::kO, sds, Smem::kP, sq, Smem::kT, R);   // dk (C, D) += ds^T q
    block_gemm<R, D, false, false, false>(sdq, Smem::kO, sds, Smem::kP, sk, Smem::kT, C);  // dq (R, D) = ds k
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * in.E; idx += kThreads) {
      const int64_t r = idx / in.E, c = idx % in.E;
      atomicAdd(dq_n + (i0 + r) * g.ldq.row_stride + c, sdq[r * Smem::kO + c]);
    }
  }
  __syncthreads();
  T *dk_j = g.dk + g.ldk.at(n, j0), *dv_j = g.dv + g.ldv.at(n, j0);  // this block's rows of dk and dv
  for (int idx = threadIdx.x; idx < cols * in.E; idx += kThreads)
    dk_j[(idx / in.E) * g.ldk.row_stride + idx % in.E] = T(sdk[(idx / in.E) * Smem::kO + idx % in.E]);
  for (int idx = threadIdx.x; idx < cols * in.Ev; idx += kThreads)
    dv_j[(idx / in.Ev) * g.ldv.row_stride + idx % in.Ev] = T(sdv[(idx / in.Ev) * Smem::kO + idx % in.Ev]);
}

// ---- host side ------------------------------------------------------------------------------

// fn.template operator()<T, D>() for dtype's T and the smallest head dim D of 32, 64, 128
// that holds `head_dim`; false when the kernels do not take them.
template <typename F>
bool dispatch_attention(DType dtype, int64_t head_dim, F&& fn) {
  auto with_dim = [&]<typename T>() {
    if (head_dim <= 32) fn.template operator()<T, 32>();
    else if (head_dim <= 64) fn.template operator()<T, 64>();
    else if (head_dim <= kMaxHeadDim) fn.template operator()<T, 128>();
    else return false;
    return true;
  };
  switch (dtype) {
    case kFloat32: return with_dim.template operator()<float>();
    case kFloat16: return with_dim.template operator()<Half>();
    case kBFloat16: return with_dim.template operator()<BFloat16>();
    default: return false;
  }
}

template <typename T>
Inputs<T> inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal, double scale,
                 const AttentionDropout& dropout) {
  Inputs<T> in{};
  in.q = static_cast<const T*>(q.data());
  in.k = static_cast<const T*>(k.data());
  in.v = static_cast<const T*>(v.data());
  in.lq = row_layout(q), in.lk = row_layout(k), in.lv = row_layout(v);
  in.L = q.size(-2), in.S = k.size(-2), in.E = q.size(-1), in.Ev = v.size(-1);
  if (bias.defined()) {
    in.bias = static_cast<const T*>(bias.data());
    in.lb = row_layout(bias), in.bs = bias.stride(-1);
  }
  in.scale = float(scale);
  in.causal = causal;
  in.dropout = dropout.p > 0;
  in.keep = attention_dropout::keep_mask(dropout, in.S);
  in.keep_scale = float(1.0 / (1.0 - dropout.p));
  return in;
}

// Launches kernel on `blocks` blocks with `bytes` of dynamic shared memory, past the
// default 48 KiB once the function is allowed it.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, int64_t blocks, size_t bytes, cudaStream_t stream, const Args&... args) {
  LOOM_ASSERT(blocks <= std::numeric_limits<int32_t>::max(), "scaled_dot_product_attention: ", blocks, " blocks");
  LOOM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  kernel<<<unsigned(blocks), kThreads, bytes, stream>>>(args...);
  LOOM_CUDA_KERNEL_CHECK();
}

int64_t head_dim(const Tensor& q, const Tensor& v) { return std::max(q.size(-1), v.size(-1)); }

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention";
  // The dropout's Philox seed and offset are launch arguments: a replayed graph would drop
  // the same weights every step (Note [CUDA graph capture]).
  if (dropout.p > 0) ::loom::cuda::detail::check_not_capturing("scaled_dot_product_attention with dropout");
  LOOM_ASSERT(lse.dtype() == kFloat32, op, ": the CUDA kernel keeps lse in float32");
  const int64_t N = attention_matrices(q), L = q.size(-2);
  if (N == 0 || L == 0) return;
  ::loom::cuda::DeviceGuard guard(q.device());
  const cudaStream_t stream = current_stream(q.device().index);
  const bool taken = dispatch_attention(q.dtype(), head_dim(q, v), [&]<typename T, int D>() {
    const int64_t tiles = (L + ForwardSmem<T, D>::R - 1) / ForwardSmem<T, D>::R;
    launch(attention_forward_kernel<T, D>, N * tiles, ForwardSmem<T, D>::bytes, stream,
           inputs<T>(q, k, v, bias, causal, scale, dropout), static_cast<T*>(out.data()), row_layout(out),
           static_cast<float*>(lse.data()));
  });
  LOOM_CHECK(taken, DTypeError, op, ": the fused CUDA kernel takes float32, float16 or bfloat16 with head dims up to ",
             kMaxHeadDim, ", got ", dtype_name(q.dtype()), " and ", head_dim(q, v));
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& bias, bool causal, double scale, const AttentionDropout& dropout) {
  const char* op = "scaled_dot_product_attention_backward";
  LOOM_ASSERT(lse.dtype() == kFloat32, op, ": the CUDA kernel keeps lse in float32");
  const int64_t N = attention_matrices(q), L = q.size(-2), S = k.size(-2);
  if (N == 0 || L == 0 || S == 0) {  // no product: every gradient is 0 (or empty)
    for (const Tensor* t : {&dq, &dk, &dv}) fill(*t, 0);
    return;
  }
  ::loom::cuda::DeviceGuard guard(q.device());
  const int device = q.device().index;
  const cudaStream_t stream = current_stream(device);
  const TensorOptions f32 = TensorOptions(kFloat32).device(q.device());
  // D (N, L) first (FlashAttention-2), then the key blocks; dq gathers in float32 (in dq
  // itself for float32).
  const Tensor rowdot = empty({N, L}, f32);
  const Tensor dq_acc = q.dtype() == kFloat32 ? dq : empty({N, L, q.size(-1)}, f32);
  fill(dq_acc, 0);
  const bool taken = dispatch_attention(q.dtype(), head_dim(q, v), [&]<typename T, int D>() {
    const RowLayout ldout = row_layout(grad_out);
    row_dot_kernel<T><<<grid_size(N * L * kWarp, device), kBlockSize, 0, stream>>>(
        static_cast<float*>(rowdot.data()), static_cast<const T*>(grad_out.data()), ldout,
        static_cast<const T*>(out.data()), row_layout(out), N * L, L, v.size(-1));
    LOOM_CUDA_KERNEL_CHECK();
    const Grads<T> g{static_cast<const T*>(grad_out.data()),
                     static_cast<const float*>(lse.data()),
                     static_cast<const float*>(rowdot.data()),
                     static_cast<float*>(dq_acc.data()),
                     static_cast<T*>(dk.data()),
                     static_cast<T*>(dv.data()),
                     ldout,
                     row_layout(dq_acc),
                     row_layout(dk),
                     row_layout(dv)};
    const int64_t tiles = (S + BackwardSmem<T, D>::C - 1) / BackwardSmem<T, D>::C;
    launch(attention_backward_kernel<T, D>, N * tiles, BackwardSmem<T, D>::bytes, stream,
           inputs<T>(q, k, v, bias, causal, scale, dropout), g);
  });
  LOOM_CHECK(taken, DTypeError, op, ": the fused CUDA kernel takes float32, float16 or bfloat16 with head dims up to ",
             kMaxHeadDim, ", got ", dtype_name(q.dtype()), " and ", head_dim(q, v));
  if (!dq_acc.is_same(dq)) copy(dq, dq_acc);
}

// Why the kernels would not take q and v: their dtype, head dims, or shared memory too
// small on q's device for both layouts; "" when they would.
std::string attention_refusal(const Tensor& q, const Tensor& v) {
  const int optin = device_properties(q.device().index).smem_optin;
  size_t bytes = 0;
  const bool taken = dispatch_attention(q.dtype(), head_dim(q, v), [&]<typename T, int D>() {
    bytes = std::max(ForwardSmem<T, D>::bytes, BackwardSmem<T, D>::bytes);
  });
  if (!taken)
    return ::loom::detail::str("the fused CUDA kernel takes float32, float16 and bfloat16 with head dims up to ",
                               kMaxHeadDim, ", got ", dtype_name(q.dtype()), " and ", head_dim(q, v));
  if (bytes > size_t(optin))
    return ::loom::detail::str("the fused CUDA kernel needs ", bytes, " bytes of shared memory a block, the device ",
                               q.device(), " allows ", optin);
  return {};
}

}  // namespace

void add_attention_kernels(Backend& b) {
  b.attention_forward = &attention_forward;
  b.attention_backward = &attention_backward;
  b.attention_refusal = &attention_refusal;
}

}  // namespace loom::kernels::cuda
