// The host-side rules of cuDNN's recurrent layers (kernels/cuda/cudnn_rnn.cpp), written
// without cuDNN so that the host tests check them: which algorithm a configuration runs,
// the keys its cached descriptors are found under, when a packed weight space still holds
// the parameters' current values, and the counters that show what a call (re)built.
//
// Note [cuDNN RNN algorithm rule]
// cuDNN runs a recurrence either as one GEMM and one gate kernel per step (STANDARD) or in
// a persistent kernel that keeps the recurrent weights on chip for all steps
// (PERSIST_STATIC; PERSIST_STATIC_SMALL_H for small hidden sizes): no per-step launches,
// which is what makes short-batch float16 LSTMs several times faster. The rule is
// PyTorch 2.x's (aten/src/ATen/native/cudnn/RNN.cpp get_algo), measured by NVIDIA and the
// PyTorch maintainers on V100, A100 and H100, with one change: Loom's forward and backward
// share one descriptor (the reserve space is the algorithm's), so a training call takes
// the backward's smaller SMALL_H limits:
// - never for float64 or rows of unequal lengths (persistent kernels refuse them);
// - SMALL_H (compute capability 6+): hidden <= 128 for LSTM and GRU, 256 for RNN in
//   training; 192 and 384 for inference;
// - PERSIST_STATIC, float16 only: one unidirectional layer, hidden <= 1024, hidden and
//   input multiples of 128, and a batch the device suits: compute capability 8.x or 9.x
//   (not 8.6) with at least 98 SMs and a batch that is a multiple of 8 up to 128 (LSTM;
//   not GRU; RNN below 96 rows or 896 units), or 7.0 with PyTorch's batch and length table.
// Nothing here was measured on Loom yet: LOOM_CUDNN_RNN_ALGO=standard | persist_static |
// persist_static_small_h overrides the rule for every layer (auto: the rule), so that a GPU
// run can time each workload under each algorithm (docs/cuda.md, bench/cudnn_rnn_algos.sh);
// ForceRNNAlgoGuard does the same for one thread, for the tests that check each algorithm
// against the CPU before the rule gives it more configurations. A persistent algorithm
// cuDNN refuses for a configuration (CUDNN_STATUS_NOT_SUPPORTED) falls back to STANDARD,
// counted in CudnnRNNCounters::algo_fallbacks.
// Deterministic mode (Note [deterministic algorithms] in core/deterministic.h) runs STANDARD
// whatever the rule or an override says: GEMMs and elementwise gate kernels per step.
// cuDNN's reproducibility list names no RNN routine; its release notes (7.6.5, 8.x) trace
// the RNNs' run-to-run differences to cuBLAS's workspace buffers when streams share them,
// which a single buffer size in CUBLAS_WORKSPACE_CONFIG (:4096:8 or :16:8) removes for the
// cuBLAS calls cuDNN makes itself (Loom's own cuBLAS calls have a fixed workspace per
// stream, kernels/cuda/blas.cpp). Nothing is documented either way for the persistent
// kernels, whose blocks work through the steps together, so the mode does not rely on
// them. PyTorch picks its algorithm without looking at the mode.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/kernels.h"

namespace loom::kernels::cuda {

// cudnnRNNAlgo_t's values.
enum class CudnnRNNAlgo { Standard = 0, PersistStatic = 1, PersistStaticSmallH = 3 };

inline const char* rnn_algo_name(CudnnRNNAlgo a) {
  switch (a) {
    case CudnnRNNAlgo::PersistStatic: return "persist_static";
    case CudnnRNNAlgo::PersistStaticSmallH: return "persist_static_small_h";
    default: return "standard";
  }
}

// What the rule looks at: the stack, the call's shape and the device.
struct RNNAlgoQuery {
  RNNMode mode = RNNMode::LSTM;
  DType dtype = kFloat32;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false;
  int64_t steps = 0, batch = 0;
  bool equal_lengths = true;  // no lengths, or every row's is the number of steps
  bool training = false;      // forward for a backward (one descriptor for both)
  int sm_major = 0, sm_minor = 0, sm_count = 0;
  bool deterministic = false;  // deterministic mode: STANDARD only
};

namespace detail {

inline bool persist_static_layers(const RNNAlgoQuery& q) {
  return q.num_layers == 1 && !q.bidirectional && q.hidden_size <= 1024 && q.hidden_size % 128 == 0 &&
         q.input_size % 128 == 0;
}

inline bool persist_static_device(const RNNAlgoQuery& q) {
  const int64_t b = q.batch, t = q.steps;
  if (q.sm_major == 7) {
    if (q.sm_minor == 5) return false;
    return ((b % 16 == 0 && b != 80 && b != 112) || b == 8) &&
           ((t >= 40 && b <= 128) || (t >= 20 && b <= 96) || (t >= 10 && b <= 32));
  }
  if (q.sm_major >= 8 && q.sm_count >= 98 && q.sm_minor != 6) {
    if (q.mode == RNNMode::GRU) return false;
    if (q.mode == RNNMode::LSTM) return b % 8 == 0 && b <= 128;
    return b % 8 == 0 && b <= 128 && (b < 96 || q.hidden_size < 896);
  }
  return false;
}

}  // namespace detail

// Whether a persistent algorithm may run at all: never for float64 or rows of unequal
// lengths (cuDNN's persistent kernels refuse them) nor in deterministic mode, whatever the
// rule or an override says.
inline bool persistent_rnn_possible(const RNNAlgoQuery& q) {
  return q.dtype != kFloat64 && q.equal_lengths && !q.deterministic;
}

// Note [cuDNN RNN algorithm rule].
inline CudnnRNNAlgo choose_rnn_algo(const RNNAlgoQuery& q) {
  if (!persistent_rnn_possible(q)) return CudnnRNNAlgo::Standard;
  const bool gated = q.mode == RNNMode::LSTM || q.mode == RNNMode::GRU;
  const int64_t small_h = q.training ? (gated ? 128 : 256) : (gated ? 192 : 384);
  if (q.sm_major >= 6 && q.hidden_size <= small_h) return CudnnRNNAlgo::PersistStaticSmallH;
  if (q.dtype == kFloat16 && detail::persist_static_layers(q) && detail::persist_static_device(q))
    return CudnnRNNAlgo::PersistStatic;
  return CudnnRNNAlgo::Standard;
}

// LOOM_CUDNN_RNN_ALGO's value: nullopt for unset, empty or "auto" (the rule).
inline std::optional<CudnnRNNAlgo> parse_rnn_algo(const char* value) {
  if (value == nullptr || std::string(value).empty() || std::string(value) == "auto") return std::nullopt;
  for (CudnnRNNAlgo a : {CudnnRNNAlgo::Standard, CudnnRNNAlgo::PersistStatic, CudnnRNNAlgo::PersistStaticSmallH})
    if (std::string(value) == rnn_algo_name(a)) return a;
  throw ValueError(std::string("LOOM_CUDNN_RNN_ALGO: expected auto, standard, persist_static or ") +
                   "persist_static_small_h, got '" + value + "'");
}

// The algorithm this thread's layers run instead of the rule's, for tests that run each
// algorithm against the CPU (the environment's LOOM_CUDNN_RNN_ALGO applies when unset).
// As with the variable, never for float64 or rows of unequal lengths.
inline std::optional<CudnnRNNAlgo>& forced_rnn_algo() {
  thread_local std::optional<CudnnRNNAlgo> algo;
  return algo;
}

// The algorithm a layer runs: the override (`forced`) where set, else the rule; STANDARD
// where no persistent one may run (deterministic mode included).
inline CudnnRNNAlgo rnn_algo_for(const RNNAlgoQuery& q, std::optional<CudnnRNNAlgo> forced) {
  return persistent_rnn_possible(q) ? forced.value_or(choose_rnn_algo(q)) : CudnnRNNAlgo::Standard;
}

// Forces `algo` on this thread while in scope.
class ForceRNNAlgoGuard {
 public:
  explicit ForceRNNAlgoGuard(CudnnRNNAlgo algo) : previous_(forced_rnn_algo()) { forced_rnn_algo() = algo; }
  ~ForceRNNAlgoGuard() { forced_rnn_algo() = previous_; }
  ForceRNNAlgoGuard(const ForceRNNAlgoGuard&) = delete;
  ForceRNNAlgoGuard& operator=(const ForceRNNAlgoGuard&) = delete;

 private:
  std::optional<CudnnRNNAlgo> previous_;
};

// What a stack's RNN descriptor and weight layout depend on.
struct CudnnRNNLayerKey {
  int device = 0;
  DType dtype = kFloat32;
  RNNMode mode = RNNMode::LSTM;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false, bias = true;
  double dropout = 0;                // between layers, 0 when it draws nothing
  uint64_t dropout_generation = 0;   // the generator's reseeds() when dropout draws; else 0
  bool tf32 = false;                 // float32 may run on TF32 tensor cores
  CudnnRNNAlgo algo = CudnnRNNAlgo::Standard;
  bool operator==(const CudnnRNNLayerKey&) const = default;
};

// What a call's data descriptors and workspace sizes depend on, beside the layer.
struct CudnnRNNShapeKey {
  int64_t steps = 0, batch = 0;
  std::vector<int64_t> lengths;  // empty: every row runs all steps
  bool training = false;
  bool operator==(const CudnnRNNShapeKey&) const = default;
};

// The most recently used entries, at most `capacity` of them (a linear scan: they are few).
template <typename Key, typename Value>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}
  // The entry for `key`, now the most recent, or null.
  Value* find(const Key& key) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!(it->first == key)) continue;
      entries_.splice(entries_.begin(), entries_, it);
      return &entries_.front().second;
    }
    return nullptr;
  }
  // Stores value under key (replacing an entry for it), dropping the least recent entry
  // beyond the capacity.
  Value& insert(Key key, Value value) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.erase(it);
        break;
      }
    }
    entries_.emplace_front(std::move(key), std::move(value));
    if (entries_.size() > capacity_) entries_.pop_back();
    return entries_.front().second;
  }
  // Drops every entry for which drop(key, value) holds.
  template <typename Drop>
  void erase_if(const Drop& drop) {
    entries_.remove_if([&](const std::pair<Key, Value>& e) { return drop(e.first, e.second); });
  }
  size_t size() const { return entries_.size(); }

 private:
  size_t capacity_;
  std::list<std::pair<Key, Value>> entries_;
};

// A tensor's identity and contents as of now: it matches the tensor later only while the
// tensor is still the same memory (the same storage and version counter, offset, sizes,
// strides, dtype) and no tracked in-place write (any `_` op, copy_, an optimizer step, a
// checkpoint load: whatever bumps the version) has touched it since. A detach()ed handle of
// the same parameter matches. Nothing is kept alive: once the storage is freed, the stamp
// has expired and matches nothing, even a new tensor at the same address.
struct TensorStamp {
  bool defined = false;
  std::weak_ptr<StorageImpl> storage;
  std::weak_ptr<VersionCounter> counter;
  uint64_t version = 0;
  int64_t offset = 0;
  Shape sizes, strides;
  DType dtype = kFloat32;
  Device device;

  static TensorStamp of(const Tensor& t) {
    TensorStamp s;
    if (!t.defined()) return s;
    const TensorImpl& impl = *t.impl();
    s.defined = true;
    s.storage = impl.storage;
    s.counter = impl.version;
    s.version = t.version();
    s.offset = impl.offset;
    s.sizes = impl.sizes;
    s.strides = impl.strides;
    s.dtype = impl.dtype;
    s.device = impl.device;
    return s;
  }
  bool expired() const { return defined && (storage.expired() || counter.expired()); }
  bool matches(const Tensor& t) const {
    if (!defined || !t.defined()) return defined == t.defined();
    const TensorImpl& impl = *t.impl();
    const std::shared_ptr<StorageImpl> s = storage.lock();
    const std::shared_ptr<VersionCounter> c = counter.lock();
    return s != nullptr && c != nullptr && s.get() == impl.storage.get() && c.get() == impl.version.get() &&
           version == t.version() && offset == impl.offset && sizes == impl.sizes && strides == impl.strides &&
           dtype == impl.dtype && device == impl.device;
  }
};

inline std::vector<TensorStamp> stamps_of(const std::vector<Tensor>& tensors) {
  std::vector<TensorStamp> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(TensorStamp::of(t));
  return out;
}

inline bool stamps_match(const std::vector<TensorStamp>& stamps, const std::vector<Tensor>& tensors) {
  if (stamps.size() != tensors.size()) return false;
  for (size_t k = 0; k < stamps.size(); ++k)
    if (!stamps[k].matches(tensors[k])) return false;
  return true;
}

inline bool any_expired(const std::vector<TensorStamp>& stamps) {
  for (const TensorStamp& s : stamps)
    if (s.expired()) return true;
  return false;
}

// What this thread's cuDNN recurrent calls did, for tests and for counting per call what a
// configuration costs (docs/cuda.md): descriptor sets built, weight spaces packed or
// reused, persistent algorithms cuDNN refused.
struct CudnnRNNCounters {
  int64_t layer_plans = 0;     // RNN descriptor, weight layout and size (per layer key)
  int64_t shape_plans = 0;     // data descriptors, workspace sizes, device lengths (per shape)
  int64_t weight_packs = 0;    // weight spaces filled from the parameters
  int64_t weight_reuses = 0;   // forwards that found the parameters already packed
  int64_t forwards = 0, backwards = 0;
  int64_t algo_fallbacks = 0;  // persistent algorithms refused, run as STANDARD
  CudnnRNNAlgo last_algo = CudnnRNNAlgo::Standard;  // what the last forward ran
};

inline CudnnRNNCounters& cudnn_rnn_counters() {
  thread_local CudnnRNNCounters counters;
  return counters;
}

}  // namespace loom::kernels::cuda
