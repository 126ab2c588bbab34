// oneDNN's matmul primitive with packed weights and a primitive cache (Note [oneDNN matmul
// primitive] in onednn_matmul.h). oneDNN's C++ API makes the primitives; the C API runs them
// (its argument array needs no std::unordered_map per call).
#include "kernels/cpu/onednn_matmul.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <functional>
#include <optional>

#include "core/error.h"
#include "kernels/cpu/gemm_bf16_operand.h"
#include "kernels/cpu/lru_cache.h"
#include "kernels/cpu/onednn_threads.h"

namespace loom::kernels::cpu {

struct OneDnnWeightsLayout {
  dnnl::memory::desc desc;
};

namespace {

using dnnl::memory;
using Dims = memory::dims;

// Made once and never destroyed: cached primitives and thread-local streams refer to it, and
// may outlive static destruction (pool threads, thread_local destructors at exit).
const dnnl::engine& engine() {
  static const dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

memory::data_type onednn_type(DType t, const char* op) {
  LOOM_CHECK(t == DType::Float32 || t == DType::BFloat16, DTypeError, op, ": oneDNN's matmul takes float32 or ",
             "bfloat16 operands, not ", dtype_name(t));
  return t == DType::Float32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// (rows, cols) strides of a matrix: row-major (ld, 1), column-major (1, ld).
Dims strides_of(const MatrixRef& m) { return m.col_major ? Dims{1, m.ld} : Dims{m.ld, 1}; }

// A float32 (rows, cols) operand rounded to bfloat16 (to nearest even, as the other bfloat16
// kernels round, gemm_bf16_operand.h) into `into`, row-major: oneDNN 2.6 has no float32 x
// bfloat16 matmul.
MatrixRef rounded_to_bf16(const MatrixRef& m, int64_t rows, int64_t cols, GrowingBuffer<uint16_t>& into) {
  uint16_t* r = into.reserve(size_t(rows * cols));
  const Bf16Operand op{m, DType::Float32};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) r[i * cols + j] = operand_bits(op, i, j);
  return MatrixRef{r, cols, false};
}

// The primitive descriptor of C (M, N) f32 [+]= A (M, K) · weights, scratchpad in user mode.
dnnl::matmul::primitive_desc make_pd(int64_t M, int64_t K, int64_t N, memory::data_type t, const Dims& a_strides,
                                     int64_t ldc, bool accumulate, const memory::desc& weights) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);  // C = A · B + 1 · C
    attr.set_post_ops(ops);
  }
  const memory::desc src({M, K}, t, a_strides), dst({M, N}, memory::data_type::f32, Dims{ldc, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, engine());
}

memory::desc any_weights(int64_t K, int64_t N, memory::data_type t) {
  return memory::desc({K, N}, t, memory::format_tag::any);
}

// ---- the caches --------------------------------------------------------------------------

// A matmul primitive: everything that shapes it.
struct MatmulKey {
  int64_t M, K, N;
  memory::data_type type;   // of A (as the primitive reads it) and the weights
  int64_t a_row_stride, a_col_stride;
  int64_t ldc;
  bool accumulate;
  memory::desc weights;     // the packed layout
  bool operator==(const MatmulKey& o) const {
    return M == o.M && K == o.K && N == o.N && type == o.type && a_row_stride == o.a_row_stride &&
           a_col_stride == o.a_col_stride && ldc == o.ldc && accumulate == o.accumulate && weights == o.weights;
  }
};

size_t mix(size_t h, int64_t v) { return h ^ (std::hash<int64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = 0;
    for (int64_t v : {k.M, k.K, k.N, int64_t(k.type), k.a_row_stride, k.a_col_stride, k.ldc, int64_t(k.accumulate),
                      int64_t(k.weights.get_size())})
      h = mix(h, v);
    return h;  // equal layouts of equal size differ in their blocking: operator== tells them apart
  }
};

struct MatmulEntry {
  dnnl::matmul primitive;
  memory::desc src, weights, dst;  // weights: the layout the primitive reads
  size_t scratchpad_bytes = 0;
  // Where the primitive reads another layout than the packed one: the reorder into it.
  std::optional<dnnl::reorder> reorder_weights;
};

// The reorder packing B (K, N) from its user layout into the primitive's.
struct PackKey {
  int64_t K, N;
  memory::data_type type;
  int64_t row_stride, col_stride;  // of the user's B
  bool operator==(const PackKey&) const = default;
};

struct PackKeyHash {
  size_t operator()(const PackKey& k) const {
    size_t h = 0;
    for (int64_t v : {k.K, k.N, int64_t(k.type), k.row_stride, k.col_stride}) h = mix(h, v);
    return h;
  }
};

struct PackEntry {
  memory::desc user, packed;
  dnnl::reorder reorder;
};

LruCache<MatmulKey, MatmulEntry, MatmulKeyHash>& matmul_cache() {
  static auto* cache = new LruCache<MatmulKey, MatmulEntry, MatmulKeyHash>(kOneDnnMatmulCacheCapacity);
  return *cache;
}

LruCache<PackKey, PackEntry, PackKeyHash>& pack_cache() {
  static auto* cache = new LruCache<PackKey, PackEntry, PackKeyHash>(kOneDnnMatmulCacheCapacity);
  return *cache;
}

std::atomic<int64_t> weight_reorders{0};

MatmulEntry make_matmul(const MatmulKey& k) {
  const Dims a_strides{k.a_row_stride, k.a_col_stride};
  const auto any = make_pd(k.M, k.K, k.N, k.type, a_strides, k.ldc, k.accumulate, any_weights(k.K, k.N, k.type));
  MatmulEntry e;
  e.src = any.src_desc();
  e.dst = any.dst_desc();
  if (any.weights_desc() == k.weights) {
    e.primitive = dnnl::matmul(any);
    e.weights = k.weights;
    e.scratchpad_bytes = any.scratchpad_desc().get_size();
    return e;
  }
  // The implementation that prefers another layout at this M may still take the packed one.
  try {
    const auto fixed = make_pd(k.M, k.K, k.N, k.type, a_strides, k.ldc, k.accumulate, k.weights);
    if (std::string(fixed.impl_info_str()) == any.impl_info_str()) {
      e.primitive = dnnl::matmul(fixed);
      e.weights = k.weights;
      e.scratchpad_bytes = fixed.scratchpad_desc().get_size();
      return e;
    }
  } catch (const dnnl::error&) {
  }
  e.primitive = dnnl::matmul(any);
  e.weights = any.weights_desc();
  e.scratchpad_bytes = any.scratchpad_desc().get_size();
  e.reorder_weights = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), k.weights, engine(), e.weights));
  return e;
}

PackEntry make_pack(const PackKey& k) {
  const auto pd = make_pd(kPackM, k.K, k.N, k.type, Dims{k.K, 1}, k.N, false, any_weights(k.K, k.N, k.type));
  PackEntry e;
  e.user = memory::desc({k.K, k.N}, k.type, Dims{k.row_stride, k.col_stride});
  e.packed = pd.weights_desc();
  e.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.user, engine(), e.packed));
  return e;
}

// ---- running -----------------------------------------------------------------------------

// A dnnl_memory_t over caller-owned data, released at scope exit.
class Memory {
 public:
  Memory(const memory::desc& d, const void* data) {
    const dnnl_status_t s = dnnl_memory_create(&m_, &d.data, engine().get(), const_cast<void*>(data));
    LOOM_CHECK(s == dnnl_success, InternalError, "oneDNN matmul: dnnl_memory_create failed (status ", int(s), ")");
  }
  ~Memory() { dnnl_memory_destroy(m_); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  dnnl_memory_t get() const { return m_; }

 private:
  dnnl_memory_t m_ = nullptr;
};

dnnl_stream_t this_thread_stream() {
  thread_local dnnl::stream stream(engine());  // a stream per thread: streams are not shared
  return stream.get();
}

void execute(const char* what, dnnl_primitive_t p, std::initializer_list<dnnl_exec_arg_t> args) {
  const dnnl_status_t s = dnnl_primitive_execute(p, this_thread_stream(), int(args.size()), args.begin());
  LOOM_CHECK(s == dnnl_success, InternalError, "oneDNN matmul: executing ", what, " failed (status ", int(s), ")");
}

// oneDNN's own exceptions, as Loom's (naming the op, shapes and types).
template <typename F>
auto rethrown(F&& f, const char* op, int64_t M, int64_t K, int64_t N, DType t) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    LOOM_CHECK(false, InternalError, op, ": oneDNN refused a ", dtype_name(t), " matmul of (", M, ", ", K, ") x (",
               K, ", ", N, "): ", e.what(), " (status ", int(e.status), ")");
    throw;  // unreachable
  }
}

}  // namespace

bool onednn_matmul_available(DType dtype) {
  auto probe = [](memory::data_type t) {
    try {
      make_pd(16, 16, 16, t, Dims{16, 1}, 16, false, any_weights(16, 16, t));
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  };
  if (dtype == DType::Float32) {
    static const bool f32 = probe(memory::data_type::f32);
    return f32;
  }
  if (dtype == DType::BFloat16) {
    static const bool bf16 = probe(memory::data_type::bf16);
    return bf16;
  }
  return false;
}

std::string onednn_matmul_impl(DType dtype, int64_t M, int64_t K, int64_t N) {
  if (!onednn_matmul_available(dtype)) return "unavailable";
  const auto t = onednn_type(dtype, "onednn_matmul_impl");
  return make_pd(M, K, N, t, Dims{K, 1}, N, false, any_weights(K, N, t)).impl_info_str();
}

void onednn_pack_weights(const MatrixRef& b, DType b_dtype, int64_t K, int64_t N, DType dtype,
                         OneDnnPackedWeights& out) {
  const memory::data_type t = onednn_type(dtype, "onednn_pack_weights");
  out.K = K;
  out.N = N;
  out.dtype = dtype;
  out.layout.reset();
  if (K == 0 || N == 0) return;
  LOOM_CHECK(b_dtype == dtype || (b_dtype == DType::Float32 && dtype == DType::BFloat16), DTypeError,
             "onednn_pack_weights: a ", dtype_name(b_dtype), " B (", K, ", ", N, ") for a ", dtype_name(dtype),
             " product");
  LOOM_CHECK(b.ld >= (b.col_major ? K : N), ValueError, "onednn_pack_weights: B (", K, ", ", N, ") with ld ", b.ld);
  // A float32 B of a bfloat16 product: rounded here as the other bfloat16 kernels round it
  // (gemm_bf16_operand.h), into a plain (K, N) buffer.
  thread_local GrowingBuffer<uint16_t> rounded;
  const MatrixRef src = b_dtype != dtype ? rounded_to_bf16(b, K, N, rounded) : b;
  const Dims s = strides_of(src);
  const std::shared_ptr<const PackEntry> pack = rethrown(
      [&] { return pack_cache().get(PackKey{K, N, t, s[0], s[1]}, [&] { return make_pack(PackKey{K, N, t, s[0], s[1]}); }); },
      "onednn_pack_weights", kPackM, K, N, dtype);
  CacheLine* dst = out.data.reserve(cache_lines_for(pack->packed.get_size()));
  OneThreadOpenMP one_thread;
  const Memory from(pack->user, src.data), to(pack->packed, dst);
  execute("the weights' reorder", pack->reorder.get(), {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}});
  out.layout = std::make_shared<const OneDnnWeightsLayout>(OneDnnWeightsLayout{pack->packed});
}

void onednn_matmul(int64_t M, const MatrixRef& a, DType a_dtype, const OneDnnPackedWeights& w, float* c,
                   int64_t ldc, bool accumulate) {
  const int64_t K = w.K, N = w.N;
  LOOM_CHECK(ldc >= N, ValueError, "onednn_matmul: C (", M, ", ", N, ") with ldc ", ldc);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(c + m * ldc, c + m * ldc + N, 0.0f);
    return;
  }
  LOOM_CHECK(w.layout != nullptr, InternalError, "onednn_matmul: B (", K, ", ", N, ") was not packed");
  const memory::data_type t = onednn_type(w.dtype, "onednn_matmul");
  LOOM_CHECK(a_dtype == w.dtype || (a_dtype == DType::Float32 && w.dtype == DType::BFloat16), DTypeError,
             "onednn_matmul: a ", dtype_name(a_dtype), " A (", M, ", ", K, ") times a ", dtype_name(w.dtype), " B");
  LOOM_CHECK(a.ld >= (a.col_major ? M : K), ValueError, "onednn_matmul: A (", M, ", ", K, ") with ld ", a.ld);
  // A float32 A of a bfloat16 product, rounded into this thread's buffer, row-major.
  thread_local GrowingBuffer<uint16_t> rounded;
  const MatrixRef src = a_dtype != w.dtype ? rounded_to_bf16(a, M, K, rounded) : a;
  const Dims s = strides_of(src);
  const MatmulKey key{M, K, N, t, s[0], s[1], ldc, accumulate, w.layout->desc};
  const std::shared_ptr<const MatmulEntry> e = rethrown(
      [&] { return matmul_cache().get(key, [&] { return make_matmul(key); }); }, "onednn_matmul", M, K, N, w.dtype);

  thread_local GrowingBuffer<CacheLine> scratchpad, reordered;
  OneThreadOpenMP one_thread;
  const void* weights = w.data.data();
  if (e->reorder_weights) {
    weight_reorders.fetch_add(1, std::memory_order_relaxed);
    void* into = reordered.reserve(cache_lines_for(e->weights.get_size()));
    const Memory from(w.layout->desc, weights), to(e->weights, into);
    execute("the weights' reorder", e->reorder_weights->get(), {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}});
    weights = into;
  }
  const Memory a_mem(e->src, src.data), w_mem(e->weights, weights), c_mem(e->dst, c);
  if (e->scratchpad_bytes == 0) {
    execute("the matmul", e->primitive.get(),
            {{DNNL_ARG_SRC, a_mem.get()}, {DNNL_ARG_WEIGHTS, w_mem.get()}, {DNNL_ARG_DST, c_mem.get()}});
  } else {
    const memory::desc pad({int64_t(e->scratchpad_bytes)}, memory::data_type::u8, memory::format_tag::a);
    const Memory pad_mem(pad, scratchpad.reserve(cache_lines_for(e->scratchpad_bytes)));
    execute("the matmul", e->primitive.get(),
            {{DNNL_ARG_SRC, a_mem.get()}, {DNNL_ARG_WEIGHTS, w_mem.get()}, {DNNL_ARG_DST, c_mem.get()},
             {DNNL_ARG_SCRATCHPAD, pad_mem.get()}});
  }
}

OneDnnMatmulCacheStats onednn_matmul_cache_stats() {
  const LruCacheStats m = matmul_cache().stats(), p = pack_cache().stats();
  return OneDnnMatmulCacheStats{m.created + p.created, m.hits + p.hits, m.entries + p.entries,
                                weight_reorders.load(std::memory_order_relaxed)};
}

void clear_onednn_matmul_cache() {
  matmul_cache().clear();
  pack_cache().clear();
}

}  // namespace loom::kernels::cpu
