// CPU batched GEMM (kernels::bmm): per batch item, one call of the GEMM in gemm.h on the
// operands' own memory (oneDNN's sgemm for float32, Eigen's for float64); bfloat16 through
// the bfloat16 GEMM (gemm_bf16.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/cpu_features.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_env.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/backend.h"

namespace loom::kernels::cpu {

bool cpu_has_avx512() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.fma;
}

bool cpu_has_avx2() { return cpu_features().avx2 && cpu_features().fma; }

GemmArgs transposed_product(const GemmArgs& g) {
  GemmArgs t = g;
  std::swap(t.M, t.N);
  std::swap(t.a, t.b);
  t.a.col_major = !t.a.col_major;
  t.b.col_major = !t.b.col_major;
  t.c_col_major = !t.c_col_major;
  return t;
}

GemmFn best_eigen_gemm() { return cpu_has_avx512() ? gemm_avx512 : cpu_has_avx2() ? gemm_avx2 : gemm_portable; }

namespace {
constexpr int kNotForced = -1;
std::atomic<int> forced_float_gemm{kNotForced};
}  // namespace

FloatGemm float_gemm() {
  const int forced = forced_float_gemm.load(std::memory_order_relaxed);
  if (forced != kNotForced) return FloatGemm(forced);
  // LOOM_CPU_FLOAT_GEMM, read once (gemm_env.h); an invalid value throws at every use.
  static const std::optional<FloatGemm> env = parse_float_gemm_env(std::getenv(kFloatGemmEnv));
  return env.value_or(FloatGemm::OneDnn);
}

void force_float_gemm(std::optional<FloatGemm> g) {
  forced_float_gemm.store(g ? int(*g) : kNotForced, std::memory_order_relaxed);
}

const char* float_gemm_name(FloatGemm g) { return g == FloatGemm::OneDnn ? "onednn" : "eigen"; }

GemmFn best_float_gemm() { return float_gemm() == FloatGemm::OneDnn ? gemm_onednn : best_eigen_gemm(); }

int64_t gemm_row_block(int64_t extent, int64_t by_threads, bool deterministic) {
  if (!deterministic) return by_threads;
  return extent > kDeterministicGemmBlock ? kDeterministicGemmBlock : 0;
}

namespace {

// Per-matrix work (M·N·K) below which a batch is split across threads, one GEMM per item,
// rather than each GEMM across threads: small GEMMs do not pay for Eigen's per-product
// thread synchronisation.
constexpr int64_t kBatchParallelWork = int64_t(1) << 24;  // 256³
// Work per parallel_for chunk, so tiny batches stay on one thread.
constexpr int64_t kBatchGrainWork = int64_t(1) << 16;
// Rows or columns of C a thread's block of a GEMM is a multiple of.
constexpr int64_t kGemmMinBlock = 16;

// The last two dims of a (B, rows, cols) tensor as a matrix the GEMM reads in place: one
// of the dims has unit stride (a size-1 dim has any) and rows do not overlap. Else none.
std::optional<MatrixRef> matrix_ref(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2), rs = t.stride(1), cs = t.stride(2);
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols))
    return MatrixRef{nullptr, rows == 1 ? cols : rs, /*col_major=*/false};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows))
    return MatrixRef{nullptr, cols == 1 ? rows : cs, /*col_major=*/true};
  return std::nullopt;
}

// A GEMM that pays for a thread: the work (multiply-adds) each thread gets at least.
constexpr int64_t kGemmWorkPerThread = int64_t(1) << 17;

// `g` over the threads: C split into one block of rows (or columns, when C is wider than
// tall) per thread, each an independent GEMM on its slices of A (or B) and C. One block per
// thread, not more: each block packs all of the other operand. A thread that has not
// started when the caller is done with its own block leaves that block to the caller
// (Note [a pool for a busy machine]).
// The rows (or columns) of a thread's block when a product of `work` multiply-adds is split
// along `extent` of them; 0 when splitting does not pay. Blocks are a multiple of
// kGemmMinBlock, so that each keeps the GEMM's register tiles whole.
int64_t gemm_thread_block(int64_t work, int64_t extent) {
  const int64_t threads = in_parallel_region() ? 1 : std::min<int64_t>(get_num_threads(), work / kGemmWorkPerThread);
  if (threads <= 1 || extent < 2 * kGemmMinBlock) return 0;
  const int64_t per_thread = (extent + threads - 1) / threads;
  return (per_thread + kGemmMinBlock - 1) / kGemmMinBlock * kGemmMinBlock;
}

// item(i, on_threads) for each of a batch of products of `work` multiply-adds each: small
// ones one item per thread (on_threads false: Eigen's per-product thread synchronisation
// does not pay), large ones one after another, each spread over the threads.
template <typename Fn>
void for_each_item(int64_t batch, int64_t work, Fn&& item) {
  if (batch > 1 && work < kBatchParallelWork) {
    parallel_for(0, batch, std::max<int64_t>(1, kBatchGrainWork / work), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) item(i, false);
    });
  } else {
    for (int64_t i = 0; i < batch; ++i) item(i, true);
  }
}

void gemm_on_threads(void (*gemm)(const GemmArgs&), const GemmArgs& g, size_t element_size) {
  const bool split_rows = g.M >= g.N;
  const int64_t extent = split_rows ? g.M : g.N;
  const int64_t block = gemm_row_block(extent, gemm_thread_block(g.M * g.N * g.K, extent),
                                      are_deterministic_algorithms_enabled());
  if (block == 0) {
    gemm(g);
    return;
  }
  auto at = [&](const void* p, int64_t elements) {
    return static_cast<const char*>(p) + size_t(elements) * element_size;
  };
  parallel_for(0, (extent + block - 1) / block, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t begin = i * block, end = std::min(extent, begin + block);
      GemmArgs part = g;
      if (split_rows) {  // C[begin:end, :] = A[begin:end, :] · B
        part.M = end - begin;
        part.a.data = at(g.a.data, g.a.col_major ? begin : begin * g.a.ld);
        part.c = const_cast<char*>(at(g.c, g.c_col_major ? begin : begin * g.ldc));
      } else {  // C[:, begin:end] = A · B[:, begin:end]
        part.N = end - begin;
        part.b.data = at(g.b.data, g.b.col_major ? begin * g.b.ld : begin);
        part.c = const_cast<char*>(at(g.c, g.c_col_major ? begin * g.ldc : begin));
      }
      gemm(part);
    }
  });
}

// A contiguous copy made without autograd (kernels never record history).
Tensor contiguous_copy(const Tensor& t) {
  Tensor c = empty(t.sizes(), t.options());
  copy(c, t);
  return c;
}

template <typename T>
void bmm_native(const Tensor& out, const Tensor& a_in, const Tensor& b_in, double beta) {
  const Tensor a = matrix_ref(a_in) ? a_in : contiguous_copy(a_in);
  const Tensor b = matrix_ref(b_in) ? b_in : contiguous_copy(b_in);
  const std::optional<MatrixRef> rc = matrix_ref(out);
  if (!rc) {
    // An output the GEMM cannot write in place: compute into a contiguous buffer.
    Tensor tmp = beta == 0 ? empty(out.sizes(), out.options()) : contiguous_copy(out);
    bmm_native<T>(tmp, a, b, beta);
    copy(out, tmp);
    return;
  }
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  GemmArgs base;
  base.M = M;
  base.N = N;
  base.K = K;
  base.a = *matrix_ref(a);
  base.b = *matrix_ref(b);
  base.ldc = rc->ld;
  base.c_col_major = rc->col_major;
  base.beta = beta;
  base.dtype = dtype_of<T>;
  const T* pa = static_cast<const T*>(a.data());
  const T* pb = static_cast<const T*>(b.data());
  T* pc = static_cast<T*>(out.data());
  const GemmFn gemm = best_float_gemm();
  auto run = [&](int64_t i, bool on_threads) {
    GemmArgs g = base;
    g.a.data = pa + i * a.stride(0);
    g.b.data = pb + i * b.stride(0);
    g.c = pc + i * out.stride(0);
    if (on_threads) gemm_on_threads(gemm, g, sizeof(T));
    else gemm(g);
  };
  for_each_item(batch, M * N * K, run);
}

// float16 / bfloat16: multiply in float (their opmath) and round the result once.
void bmm_via_float(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  auto to_float = [](const Tensor& t) {
    Tensor f = empty(t.sizes(), t.options().dtype(kFloat32));  // same device (the emulated cuda:0 too)
    copy(f, t);
    return f;
  };
  Tensor out_f = beta == 0 ? empty(out.sizes(), out.options().dtype(kFloat32)) : to_float(out);
  bmm_native<float>(out_f, to_float(a), to_float(b), beta);
  copy(out, out_f);
}

// Rows of C the bfloat16 GEMM computes into a thread's float32 buffer before they are
// rounded into out: small enough to stay in L2 (192 rows of 1024 floats: 768 KiB), and
// the row block the kernel packs A in, so slicing costs no packing.
constexpr int64_t kBf16RowSlice = 192;

// out rows [r0, r1) (row-major, N columns, bfloat16) = A's rows · B (+ out when accumulate):
// each slice of rows through this thread's float32 buffer, rounded once.
void bf16_rows(const Bf16Operand& a, const PackedBf16B& b, BFloat16* out, int64_t r0, int64_t r1, bool accumulate) {
  thread_local GrowingBuffer<float> buffer;
  const int64_t N = b.N;
  for (int64_t s0 = r0; s0 < r1; s0 += kBf16RowSlice) {
    const int64_t m = std::min(r1, s0 + kBf16RowSlice) - s0;
    float* c = buffer.reserve(size_t(m * N));
    BFloat16* o = out + s0 * N;
    if (accumulate) std::transform(o, o + m * N, c, [](BFloat16 v) { return float(v); });
    Bf16Operand rows = a;
    rows.m.data = static_cast<const uint16_t*>(a.m.data) + (a.m.col_major ? s0 : s0 * a.m.ld);
    gemm_bf16(m, rows, b, c, N, accumulate);
    std::transform(c, c + m * N, o, [](float v) { return BFloat16(v); });
  }
}

// bfloat16: the bfloat16 GEMM (Note [bfloat16 GEMM]), its float32 sums rounded once into
// out as each slice of rows is done (bf16_rows; an out that is not contiguous is computed
// into a contiguous one first). Per batch item B is packed once and C's rows are split
// across the threads; a batch of small products runs one item per thread instead.
void bmm_bf16(const Tensor& out, const Tensor& a_in, const Tensor& b_in, double beta) {
  if (!out.is_contiguous()) {
    Tensor tmp = beta == 0 ? empty(out.sizes(), out.options()) : contiguous_copy(out);
    bmm_bf16(tmp, a_in, b_in, beta);
    copy(out, tmp);
    return;
  }
  const Tensor a = matrix_ref(a_in) ? a_in : contiguous_copy(a_in);
  const Tensor b = matrix_ref(b_in) ? b_in : contiguous_copy(b_in);
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const auto* pa = static_cast<const uint16_t*>(a.data());
  const auto* pb = static_cast<const uint16_t*>(b.data());
  BFloat16* po = static_cast<BFloat16*>(out.data());  // (batch, M, N) row-major
  auto operand = [](const Tensor& t, const uint16_t* base, int64_t i) {
    MatrixRef m = *matrix_ref(t);
    m.data = base + i * t.stride(0);
    return Bf16Operand{m, DType::BFloat16};
  };
  auto item = [&](int64_t i, bool on_threads) {
    thread_local PackedBf16B reused;  // its memory reused by the next product on this thread
    // A reference: in the lambda below, `reused` would name each worker's own instance.
    PackedBf16B& packed = reused;
    pack_bf16_b(operand(b, pb, i), K, N, packed);
    const Bf16Operand ai = operand(a, pa, i);
    BFloat16* oi = po + i * M * N;
    if (are_deterministic_algorithms_enabled()) {
      // Fixed slices of rows, whatever the threads (Note [deterministic algorithms]).
      parallel_for(0, (M + kBf16RowSlice - 1) / kBf16RowSlice, 1, [&](int64_t i0, int64_t i1) {
        bf16_rows(ai, packed, oi, i0 * kBf16RowSlice, std::min(M, i1 * kBf16RowSlice), beta != 0);
      });
      return;
    }
    const int64_t block = on_threads ? gemm_thread_block(M * N * K, M) : 0;
    if (block == 0) return bf16_rows(ai, packed, oi, 0, M, beta != 0);
    parallel_for(0, M, block, [&](int64_t r0, int64_t r1) { bf16_rows(ai, packed, oi, r0, r1, beta != 0); });
  };
  for_each_item(batch, M * N * K, item);
}

void bmm(const Tensor& out, const Tensor& a, const Tensor& b, double beta) {
  LOOM_CHECK(a.dim() == 3 && b.dim() == 3 && out.dim() == 3, ShapeError, "bmm: expected 3-D tensors, got ",
             shape_str(a.sizes()), " @ ", shape_str(b.sizes()), " into ", shape_str(out.sizes()));
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  LOOM_CHECK(b.size(0) == batch && b.size(1) == K && out.sizes() == Shape({batch, M, N}), ShapeError,
             "bmm: ", shape_str(a.sizes()), " @ ", shape_str(b.sizes()), " into ", shape_str(out.sizes()),
             ": expected b of shape ", shape_str({batch, K, N}), " and out of shape ",
             shape_str({batch, M, N}));
  LOOM_CHECK(a.dtype() == b.dtype() && out.dtype() == a.dtype(), DTypeError, "bmm: expected one dtype, got ",
             dtype_name(a.dtype()), " @ ", dtype_name(b.dtype()), " into ", dtype_name(out.dtype()));
  LOOM_CHECK(beta == 0 || beta == 1, ValueError, "bmm: beta must be 0 or 1, got ", beta);
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum
    if (beta == 0) fill(out, 0);
    return;
  }
  dispatch_floating(a.dtype(), "bmm", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) bmm_native<T>(out, a, b, beta);
    else if constexpr (std::is_same_v<T, BFloat16>) bmm_bf16(out, a, b, beta);
    else bmm_via_float(out, a, b, beta);
  });
}

}  // namespace

void add_matmul_kernels(Backend& b) { b.bmm = &bmm; }

}  // namespace loom::kernels::cpu
