// The avx512_bf16 kernel of the bfloat16 GEMM (Note [bfloat16 GEMM], gemm_bf16.h). Compiled
// with AVX-512 and AVX512-BF16 (the build's flags for *_avx512bf16.cpp); called only after
// cpu_has_avx512_bf16().
#include <algorithm>
#include <cstring>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#include "kernels/cpu/gemm_bf16_operand.h"

namespace loom::kernels::cpu {

#if defined(__AVX512BF16__)
namespace {

constexpr int64_t kPanel = 32;     // columns of a B panel and of a C tile (two registers)
constexpr int kTileRows = 12;      // rows of a C tile: 24 accumulators + 2 B + 1 A registers
// K pairs per block: a long block means few passes over C; the B panel slice (64 KiB)
// streams from L2 well (measured: 1024³ 12 ms at 512, 19 ms at 128, one thread).
constexpr int64_t kBlockPairs = 512;
constexpr int64_t kBlockRows = 16 * kTileRows;  // rows of A per packed block (384 KiB, in L2)
static_assert(kBlockRows * kBlockPairs == kBf16PackABlock);

// The (x[k][i], x[k+1][i]) pairs for i = i0 .. i0+15 (lanes off in `mask` are zero), where
// x[k][i] is at data[k·ld + i]: B's pairs when B is row-major, A's when A is column-major.
inline __m512i pairs_across(const Bf16Operand& op, int64_t k, int64_t i0, __mmask16 mask = 0xffff) {
  __m256i lo, hi;
  if (op.dtype == DType::BFloat16) {
    const uint16_t* p = static_cast<const uint16_t*>(op.m.data) + k * op.m.ld + i0;
    lo = _mm256_maskz_loadu_epi16(mask, p);
    hi = _mm256_maskz_loadu_epi16(mask, p + op.m.ld);
  } else {
    const float* p = static_cast<const float*>(op.m.data) + k * op.m.ld + i0;
    lo = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, p));
    hi = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, p + op.m.ld));
  }
  return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

inline uint32_t pair_at(const Bf16Operand& op, int64_t rows, int64_t cols, int64_t i, int64_t j, bool pair_down) {
  // pair_down: (op[i][j], op[i+1][j]) (B's pairs); else (op[i][j], op[i][j+1]) (A's).
  auto bits = [&](int64_t r, int64_t c) -> uint32_t { return r < rows && c < cols ? operand_bits(op, r, c) : 0; };
  return pair_down ? bits(i, j) | bits(i + 1, j) << 16 : bits(i, j) | bits(i, j + 1) << 16;
}

// Pairs p0 .. p0+n-1 of row m of a row-major A, all inside K, into out[0 .. n).
inline void row_pairs(const Bf16Operand& a, int64_t m, int64_t p0, int64_t n, uint32_t* out) {
  if (n <= 0) return;
  if (a.dtype == DType::BFloat16) {
    const uint16_t* row = static_cast<const uint16_t*>(a.m.data) + m * a.m.ld + 2 * p0;
    std::memcpy(out, row, size_t(n) * sizeof(uint32_t));  // adjacent bfloat16 are a pair already
    return;
  }
  const float* row = static_cast<const float*>(a.m.data) + m * a.m.ld + 2 * p0;
  int64_t p = 0;
  for (; p + 16 <= n; p += 16)  // 32 floats -> 16 pairs, in memory order
    _mm512_storeu_si512(out + p, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 2 * p + 16),
                                                              _mm512_loadu_ps(row + 2 * p)));
  for (; p < n; ++p) out[p] = uint32_t(round_to_bf16(row[2 * p])) | uint32_t(round_to_bf16(row[2 * p + 1])) << 16;
}

// Where pair p of row r of a packed group of A is: across (p·R + r, R the group's rows: a
// column-major A's pairs, R per load) or along (r·kBlockPairs + p: a row-major A's rows of
// pairs as they are in memory, no transposition). The tile reads either with one broadcast.
enum class ALayout { Across, Along };

template <ALayout L>
constexpr int64_t group_stride(int64_t kcp) {  // uint32 between two groups of kTileRows rows
  return L == ALayout::Across ? kTileRows * kcp : kTileRows * kBlockPairs;
}

// A[m0 : m0+mc, 2·p0 : 2·(p0+kcp)] as row groups of kTileRows, group g at
// out[g·group_stride], laid across for a column-major A, along for a row-major one.
void pack_a_block(const Bf16Operand& a, int64_t M, int64_t K, int64_t m0, int64_t mc, int64_t p0, int64_t kcp,
                  uint32_t* out) {
  // Pairs wholly inside K; a last pair that holds only column K-1 goes the slow way.
  const int64_t full = std::min(kcp, K / 2 - p0);
  const int64_t groups = (mc + kTileRows - 1) / kTileRows;
  if (!a.m.col_major) {
    for (int64_t r = 0; r < mc; ++r) {
      uint32_t* dst = out + (r / kTileRows) * group_stride<ALayout::Along>(kcp) + (r % kTileRows) * kBlockPairs;
      row_pairs(a, m0 + r, p0, full, dst);
      for (int64_t p = std::max<int64_t>(full, 0); p < kcp; ++p)
        dst[p] = pair_at(a, M, K, m0 + r, 2 * (p0 + p), false);
    }
    return;
  }
  // Column-major: a group's rows are adjacent in each column, R pairs per load. Column by
  // column across all groups, so each column of the block is read once, in order.
  for (int64_t p = 0; p < full; ++p) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t R = std::min<int64_t>(kTileRows, mc - g * kTileRows);
      const __mmask16 rows = __mmask16((1u << R) - 1);
      _mm512_mask_storeu_epi32(out + g * group_stride<ALayout::Across>(kcp) + p * R, rows,
                               pairs_across(a, 2 * (p0 + p), m0 + g * kTileRows, rows));
    }
  }
  for (int64_t g = 0; g < groups; ++g) {  // a last pair holding only column K-1
    const int64_t R = std::min<int64_t>(kTileRows, mc - g * kTileRows);
    uint32_t* dst = out + g * group_stride<ALayout::Across>(kcp);
    for (int64_t p = std::max<int64_t>(full, 0); p < kcp; ++p)
      for (int64_t r = 0; r < R; ++r) dst[p * R + r] = pair_at(a, M, K, m0 + g * kTileRows + r, 2 * (p0 + p), false);
  }
}

// C tile (R, ncols) (+)= A group (R rows x kcp pairs, laid out as L) · B panel slice (kcp
// pairs x 32).
template <int R, ALayout L>
void tile(const uint32_t* a, const uint32_t* b, int64_t kcp, float* c, int64_t ldc, int64_t ncols, bool accumulate) {
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kcp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kPanel);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kPanel + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const uint32_t pair = a[L == ALayout::Across ? p * R + r : r * kBlockPairs + p];
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(pair));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __mmask16 m0 = ncols >= 16 ? __mmask16(0xffff) : __mmask16((1u << ncols) - 1);
  const __mmask16 m1 = ncols >= 32 ? __mmask16(0xffff) : ncols > 16 ? __mmask16((1u << (ncols - 16)) - 1) : 0;
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, row));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

using TileFn = void (*)(const uint32_t*, const uint32_t*, int64_t, float*, int64_t, int64_t, bool);
template <ALayout L>
constexpr TileFn kTiles[kTileRows + 1] = {nullptr,     &tile<1, L>, &tile<2, L>,  &tile<3, L>,  &tile<4, L>,
                                          &tile<5, L>, &tile<6, L>, &tile<7, L>,  &tile<8, L>,  &tile<9, L>,
                                          &tile<10, L>, &tile<11, L>, &tile<12, L>};

}  // namespace

void pack_bf16_pairs_avx512bf16(const Bf16Operand& b, int64_t K, int64_t N, uint32_t* out, uint32_t* column) {
  const int64_t Kp = (K + 1) / 2, panels = (N + kPanel - 1) / kPanel;
  if (b.m.col_major) {
    // Column n of B is row n of a row-major B^T, whose adjacent elements are B's pairs.
    const Bf16Operand bt{MatrixRef{b.m.data, b.m.ld, false}, b.dtype};
    const int64_t full = K / 2;
    for (int64_t j = 0; j < panels; ++j) {
      uint32_t* panel = out + j * Kp * kPanel;
      for (int64_t n = 0; n < kPanel; ++n) {
        const int64_t col = j * kPanel + n;
        if (col < N) row_pairs(bt, col, 0, full, column);
        for (int64_t p = 0; p < full; ++p) panel[p * kPanel + n] = col < N ? column[p] : 0;
        if (full < Kp) panel[full * kPanel + n] = pair_at(b, K, N, 2 * full, col, true);
      }
    }
    return;
  }
  constexpr int64_t kPairsPerSweep = 16;  // 32 rows of B at a time, read across all panels
  for (int64_t q = 0; q < Kp; q += kPairsPerSweep) {
    for (int64_t j = 0; j < panels; ++j) {
      const int64_t n_begin = j * kPanel;
      for (int64_t p = q; p < std::min(Kp, q + kPairsPerSweep); ++p) {
        uint32_t* dst = out + (j * Kp + p) * kPanel;
        int64_t n = 0;
        if (2 * p + 1 < K)
          for (; n + 16 <= kPanel && n_begin + n + 16 <= N; n += 16)
            _mm512_storeu_si512(dst + n, pairs_across(b, 2 * p, n_begin + n));
        for (; n < kPanel; ++n) dst[n] = pair_at(b, K, N, 2 * p, n_begin + n, true);
      }
    }
  }
}

void gemm_bf16_avx512bf16(int64_t M, const Bf16Operand& a, const uint32_t* b_pairs, int64_t K, int64_t N, float* c,
                          int64_t ldc, bool accumulate, uint32_t* a_block) {
  const int64_t Kp = (K + 1) / 2, panels = (N + kPanel - 1) / kPanel;
  for (int64_t p0 = 0; p0 < Kp; p0 += kBlockPairs) {
    const int64_t kcp = std::min(kBlockPairs, Kp - p0);
    for (int64_t m0 = 0; m0 < M; m0 += kBlockRows) {
      const int64_t mc = std::min(kBlockRows, M - m0);
      pack_a_block(a, M, K, m0, mc, p0, kcp, a_block);
      const bool across = a.m.col_major;
      const int64_t stride = across ? group_stride<ALayout::Across>(kcp) : group_stride<ALayout::Along>(kcp);
      for (int64_t j = 0; j < panels; ++j) {
        const uint32_t* b = b_pairs + (j * Kp + p0) * kPanel;
        const int64_t ncols = std::min(kPanel, N - j * kPanel);
        for (int64_t g = 0; g * kTileRows < mc; ++g) {
          const int64_t R = std::min<int64_t>(kTileRows, mc - g * kTileRows);
          float* ct = c + (m0 + g * kTileRows) * ldc + j * kPanel;
          const TileFn fn = across ? kTiles<ALayout::Across>[R] : kTiles<ALayout::Along>[R];
          fn(a_block + g * stride, b, kcp, ct, ldc, ncols, accumulate || p0 > 0);
        }
      }
    }
  }
}

#else  // a compiler or target without AVX512-BF16: never called (cpu_has_avx512_bf16 is false)

void pack_bf16_pairs_avx512bf16(const Bf16Operand&, int64_t, int64_t, uint32_t*, uint32_t*) {}
void gemm_bf16_avx512bf16(int64_t, const Bf16Operand&, const uint32_t*, int64_t, int64_t, float*, int64_t, bool,
                          uint32_t*) {}

#endif

}  // namespace loom::kernels::cpu
