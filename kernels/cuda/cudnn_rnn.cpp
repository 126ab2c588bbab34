// nn::RNN / LSTM / GRU on a GPU through cuDNN's RNN API (cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8): the whole stack of layers and
// directions in one call — the CUDA backend's kernels::rnn_stack_forward/backward
// (kernels/kernels.h). Compiled to nothing but an empty registration without cuDNN
// (LOOM_WITH_CUDNN), where the layers run the sweep kernels of kernels/cuda/rnn.cu.
// float16 (the layers under CUDA autocast: Note [recurrent layers under CUDA autocast])
// and bfloat16 (a bfloat16 model; cuDNN takes it from 9.13 on, asked at run time with
// cudnnGetVersion: older cuDNN leaves bfloat16 to the sweep kernels, Note [16-bit recurrent
// layers]) run on tensor cores with float32 math (math precision CUDNN_DATA_FLOAT; float16
// with CUDNN_TENSOR_OP_MATH), as PyTorch's; every tensor, the weights included, is in the
// input's dtype (autocast's casts), and so are the gradients, which the casts' backward
// widens to the parameters' float32. The algorithm: Note [cuDNN RNN algorithm rule] in
// kernels/rnn/cudnn_rnn_plan.h.
//
// Note [cuDNN RNN plans]
// What a call needs besides its tensors is built once per configuration and kept in this
// thread's caches: a LayerPlan per CudnnRNNLayerKey (the RNN and dropout descriptors, the
// weight space's size and layout), and within it a ShapePlan per CudnnRNNShapeKey (the
// data descriptors, the workspace and reserve sizes, the lengths on the device). A call
// that repeats a configuration creates no descriptor, asks cuDNN no size, uploads nothing.
// Plans never change once built (a new key gets a new plan), and a call's saved state
// holds the plans it ran with, so a backward always sees its forward's descriptors.
//
// Note [cuDNN weight packing]
// cuDNN keeps every weight and bias in one flat "weight space" whose layout it chooses;
// cudnnGetRNNWeightParams gives the address of each (pseudo-layer, gate matrix). Loom's
// parameters stay PyTorch's separate tensors (w_ih (G·H, I): gate g is rows g·H..g·H+H,
// in PyTorch's gate order, which is cuDNN's: LSTM i f g o, GRU r z n). A forward copies
// them into a weight space (device-to-device, one copy per contiguous run) only when they
// changed: the packed space is kept beside the parameters' TensorStamps (same memory, same
// version), so a model whose parameters did not move since its last forward (evaluation,
// several forwards per optimizer step) reuses it, as PyTorch's flattened weights. An
// optimizer step or any in-place write bumps the version and the next forward packs a new
// space (never the old one: a saved state may still read it). Under autocast the weights
// are fresh float16 casts every step, and are packed every step, as PyTorch does. Backward
// copies the weight-gradient space out into one gradient per parameter through the same
// map, so gradients land in PyTorch's per-parameter layout.
#include "kernels/cuda/backend.h"

#ifdef LOOM_WITH_CUDNN

#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <mutex>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include "core/cuda.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "core/generator.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/device_properties.h"
#include "kernels/rnn/cudnn_rnn_plan.h"
#include "kernels/rnn/rnn_rules.h"

namespace loom::kernels::cuda {

namespace {

// Owning wrappers of the descriptors.
template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
struct Descriptor {
  D desc = nullptr;
  Descriptor() { LOOM_CUDNN_CHECK(Create(&desc)); }
  ~Descriptor() { Destroy(desc); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};
using RNNDesc = Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using DataDesc = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using DropoutDesc =
    Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;

// cuDNN's version at run time (the library loaded, not the headers built against).
size_t cudnn_version() {
  static const size_t version = cudnnGetVersion();
  return version;
}

// cuDNN's recurrent layers take bfloat16 from 9.13 on.
constexpr size_t kCudnnBFloat16Version = 91300;

cudnnDataType_t data_type(DType d) {
  switch (d) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: throw DTypeError("cudnn_rnn: unsupported dtype " + std::string(dtype_name(d)));
  }
}

cudnnRNNMode_t cell_mode(RNNMode m) {
  switch (m) {
    case RNNMode::LSTM: return CUDNN_LSTM;
    case RNNMode::GRU: return CUDNN_GRU;
    case RNNMode::RNN_RELU: return CUDNN_RNN_RELU;
    default: return CUDNN_RNN_TANH;
  }
}

// Throws for a failed status as LOOM_CUDNN_CHECK does, naming `call`.
void check_status(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    ::loom::cuda::detail::throw_cudnn_error(int(status), call, "cudnn_rnn", __FILE__, __LINE__);
}

// One device-to-device copy of the weight map: `bytes` at `space_offset` in the weight
// space <-> at `param_offset` in weights[param].
struct WeightCopy {
  size_t space_offset, param, param_offset, bytes;
};

// Appends a copy, merged into the previous one when both sides continue it.
void add_copy(std::vector<WeightCopy>& copies, WeightCopy c) {
  if (!copies.empty()) {
    WeightCopy& last = copies.back();
    if (last.param == c.param && last.space_offset + last.bytes == c.space_offset &&
        last.param_offset + last.bytes == c.param_offset) {
      last.bytes += c.bytes;
      return;
    }
  }
  copies.push_back(c);
}

// cuDNN's inter-layer dropout keeps its generator states on the device: made once per
// device and thread (seeded from Loom's generator), restored into later descriptors, and
// made again after manual_seed so that a seeded run draws the same masks.
struct DropoutStates {
  Tensor states;
  size_t bytes = 0;
  uint64_t seed = 0;
  uint64_t reseeds = 0;  // Loom's generator's reseeds() when the states were made
};

void set_dropout(cudnnDropoutDescriptor_t desc, cudnnHandle_t handle, double p, Device device) {
  if (p == 0) {  // no states needed: nothing is drawn
    LOOM_CUDNN_CHECK(cudnnSetDropoutDescriptor(desc, handle, 0.f, nullptr, 0, 0));
    return;
  }
  thread_local std::map<int, DropoutStates> per_device;
  DropoutStates& s = per_device[device.index];
  Generator& g = default_generator();
  if (!s.states.defined() || s.reseeds != g.reseeds()) {
    size_t bytes = 0;
    LOOM_CUDNN_CHECK(cudnnDropoutGetStatesSize(handle, &bytes));
    if (!s.states.defined()) s.states = device_bytes(bytes, device, false);
    s.bytes = bytes;
    s.reseeds = g.reseeds();
    s.seed = Philox::block(g.seed(), g.reserve(1))[0];
    LOOM_CUDNN_CHECK(cudnnSetDropoutDescriptor(desc, handle, float(p), s.states.data(), bytes, s.seed));
  } else {
    LOOM_CUDNN_CHECK(cudnnRestoreDropoutDescriptor(desc, handle, float(p), s.states.data(), s.bytes, s.seed));
  }
}

int32_t to_int(int64_t v, const char* what) {
  LOOM_CHECK(v >= 0 && v <= std::numeric_limits<int32_t>::max(), ValueError, "cudnn_rnn: ", what, " ", v,
             " does not fit cuDNN's 32-bit sizes");
  return int32_t(v);
}

// cuDNN reads every tensor as x's data type and copies the weights byte for byte
// (Note [cuDNN weight packing]): a float32 weight beside a float16 input (an autocast
// cast missed) must be an error, not a wrong result.
void check_like_input(const Tensor& x, const std::vector<Tensor>& tensors, const char* what) {
  for (const Tensor& t : tensors) {
    LOOM_CHECK(!t.defined() || t.dtype() == x.dtype(), DTypeError, "cudnn_rnn: a ", what, " of shape ",
               shape_str(t.sizes()), " is ", dtype_name(t.dtype()), ", the input ", dtype_name(x.dtype()));
    LOOM_CHECK(!t.defined() || t.device() == x.device(), DeviceError, "cudnn_rnn: a ", what, " of shape ",
               shape_str(t.sizes()), " is on ", t.device(), ", the input on ", x.device());
  }
}

// The rows of w_ih (layer 0: input_size; later layers: D·H) or w_hh (H) of pseudo-layer
// `pseudo`, as check_weight_sizes expects them.
int64_t weight_columns(const CudnnRNNLayerKey& k, int64_t pseudo, bool recurrent) {
  const int64_t D = k.bidirectional ? 2 : 1;
  if (recurrent) return k.hidden_size;
  return pseudo < D ? k.input_size : D * k.hidden_size;
}

// w_ih (G·H, I or D·H), w_hh (G·H, H), b_ih and b_hh (G·H) per layer and direction: the
// copies of the weight map read whole gate blocks of them.
void check_weight_sizes(const CudnnRNNLayerKey& k, const std::vector<Tensor>& weights) {
  const int64_t D = k.bidirectional ? 2 : 1, GH = rnn_gates(k.mode) * k.hidden_size;
  for (int64_t pseudo = 0; pseudo < k.num_layers * D; ++pseudo) {
    const Tensor* w = &weights[size_t(4 * pseudo)];
    const Shape expected[4] = {{GH, weight_columns(k, pseudo, false)}, {GH, k.hidden_size}, {GH}, {GH}};
    for (int i = 0; i < 4; ++i)
      LOOM_CHECK((i >= 2 && !k.bias && !w[i].defined()) || (w[i].defined() && w[i].sizes() == expected[i]),
                 ShapeError, "cudnn_rnn: weight ", i, " of layer ", pseudo / D, " has shape ",
                 w[i].defined() ? shape_str(w[i].sizes()) : std::string("(undefined)"), ", expected ",
                 shape_str(expected[i]));
  }
}

// ---- plans (Note [cuDNN RNN plans]) ------------------------------------------------------------

struct ShapePlan {
  DataDesc x_desc, y_desc;
  TensorDesc h_desc;
  Tensor dev_lengths;  // int32 (B)
  size_t work_bytes = 0, reserve_bytes = 0;
  bool padded = false;  // some row is shorter than the sequence
};

struct LayerPlan {
  CudnnRNNLayerKey key;
  CudnnRNNAlgo algo = CudnnRNNAlgo::Standard;  // the descriptor's: STANDARD after a fallback
  DropoutDesc dropout;                          // referenced by rnn: declared first, destroyed last
  RNNDesc rnn;
  size_t space_bytes = 0;
  std::vector<WeightCopy> copies;  // the weight map (Note [cuDNN weight packing])
  LruCache<CudnnRNNShapeKey, std::shared_ptr<const ShapePlan>> shapes{8};
};

// The number of elements a tensor descriptor describes.
int64_t described_elements(cudnnTensorDescriptor_t desc) {
  cudnnDataType_t type;
  int nb_dims = 0;
  std::array<int, 8> dims{}, strides{};
  LOOM_CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc, int(dims.size()), &type, &nb_dims, dims.data(), strides.data()));
  int64_t n = 1;
  for (int d = 0; d < nb_dims; ++d) n *= dims[size_t(d)];
  return n;
}

// The weight map: for every pseudo-layer (layer · D + dir) and gate matrix, where cuDNN
// keeps it in a weight space at `base` and which rows of which parameter it is.
std::vector<WeightCopy> weight_map(cudnnHandle_t handle, const LayerPlan& plan, char* base) {
  const CudnnRNNLayerKey& k = plan.key;
  const int64_t D = k.bidirectional ? 2 : 1, H = k.hidden_size, G = rnn_gates(k.mode);
  const size_t elem = size_t(element_size(k.dtype));
  TensorDesc m_desc, b_desc;
  std::vector<WeightCopy> matrices, biases;
  for (int64_t pseudo = 0; pseudo < k.num_layers * D; ++pseudo) {
    const size_t first = size_t(4 * pseudo);  // w_ih, w_hh, b_ih, b_hh of this layer/direction
    for (int64_t id = 0; id < 2 * G; ++id) {
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      LOOM_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, plan.rnn.desc, int32_t(pseudo), plan.space_bytes, base,
                                               int32_t(id), m_desc.desc, &m_addr, b_desc.desc, &b_addr));
      const bool recurrent = id >= G;
      const int64_t gate = id % G, columns = weight_columns(k, pseudo, recurrent);
      const size_t m_bytes = size_t(H * columns) * elem;
      LOOM_CHECK(m_addr != nullptr, InternalError, "cudnn_rnn: cuDNN gave no address for matrix ", id,
                 " of pseudo-layer ", pseudo);
      LOOM_CHECK(described_elements(m_desc.desc) == H * columns, InternalError, "cudnn_rnn: cuDNN's matrix ", id,
                 " of pseudo-layer ", pseudo, " has ", described_elements(m_desc.desc), " elements, expected ", H,
                 " x ", columns);
      add_copy(matrices, {size_t(static_cast<char*>(m_addr) - base), first + (recurrent ? 1 : 0),
                          size_t(gate) * m_bytes, m_bytes});
      if (b_addr != nullptr) {
        LOOM_CHECK(described_elements(b_desc.desc) == H, InternalError, "cudnn_rnn: cuDNN's bias ", id,
                   " of pseudo-layer ", pseudo, " has ", described_elements(b_desc.desc), " elements, expected ", H);
        const size_t b_bytes = size_t(H) * elem;
        add_copy(biases, {size_t(static_cast<char*>(b_addr) - base), first + (recurrent ? 3 : 2),
                          size_t(gate) * b_bytes, b_bytes});
      }
    }
  }
  matrices.insert(matrices.end(), biases.begin(), biases.end());
  for (const WeightCopy& c : matrices)
    LOOM_CHECK(c.space_offset + c.bytes <= plan.space_bytes, InternalError,
               "cudnn_rnn: cuDNN's weight layout does not fit its weight space");
  return matrices;
}

// The LayerPlan of `key` with algorithm `algo`, or null when cuDNN refuses that algorithm
// for it (CUDNN_STATUS_NOT_SUPPORTED; only asked of persistent ones).
std::shared_ptr<LayerPlan> build_layer(const CudnnRNNLayerKey& key, CudnnRNNAlgo algo, cudnnHandle_t handle) {
  auto plan = std::make_shared<LayerPlan>();
  plan->key = key;
  plan->algo = algo;
  const cudnnDataType_t type = data_type(key.dtype);
  const cudnnDataType_t math_prec = key.dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  // As PyTorch's: float16 asks for tensor cores, float32 forbids TF32 unless allowed (as
  // matmul), bfloat16 and float64 leave it to cuDNN (which runs bfloat16 on tensor cores).
  const cudnnMathType_t math = key.dtype == kFloat16                ? CUDNN_TENSOR_OP_MATH
                               : key.dtype == kFloat32 && !key.tf32 ? CUDNN_FMA_MATH
                                                                    : CUDNN_DEFAULT_MATH;
  set_dropout(plan->dropout.desc, handle, key.dropout, Device(DeviceType::CUDA, key.device));
  const cudnnStatus_t set = cudnnSetRNNDescriptor_v8(
      plan->rnn.desc, cudnnRNNAlgo_t(int(algo)), cell_mode(key.mode),
      key.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
      key.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, type, math_prec, math,
      to_int(key.input_size, "input size"), to_int(key.hidden_size, "hidden size"),
      to_int(key.hidden_size, "projection size"), to_int(key.num_layers, "num_layers"), plan->dropout.desc,
      CUDNN_RNN_PADDED_IO_ENABLED);
  if (set == CUDNN_STATUS_NOT_SUPPORTED && algo != CudnnRNNAlgo::Standard) return nullptr;
  check_status(set, "cudnnSetRNNDescriptor_v8");
  const cudnnStatus_t sized = cudnnGetRNNWeightSpaceSize(handle, plan->rnn.desc, &plan->space_bytes);
  if (sized == CUDNN_STATUS_NOT_SUPPORTED && algo != CudnnRNNAlgo::Standard) return nullptr;
  check_status(sized, "cudnnGetRNNWeightSpaceSize");
  // The layout is asked of a real (scratch) weight space; only the offsets are kept.
  const Tensor scratch = device_bytes(plan->space_bytes, Device(DeviceType::CUDA, key.device), false);
  plan->copies = weight_map(handle, *plan, static_cast<char*>(scratch.data()));
  ++cudnn_rnn_counters().layer_plans;
  return plan;
}

// The ShapePlan of `shape` for `layer`, or null when cuDNN refuses the layer's persistent
// algorithm for it.
std::shared_ptr<const ShapePlan> build_shape(const LayerPlan& layer, const CudnnRNNShapeKey& shape,
                                             cudnnHandle_t handle) {
  auto plan = std::make_shared<ShapePlan>();
  const CudnnRNNLayerKey& k = layer.key;
  const int64_t D = k.bidirectional ? 2 : 1;
  const cudnnDataType_t type = data_type(k.dtype);
  // Each row's length (Note [recurrent layer rules]), for the descriptors and the device.
  const rnn_rules::Lengths rows = rnn_rules::host_lengths(shape.lengths, shape.steps);
  std::vector<int32_t> lens(size_t(shape.batch));
  for (int64_t b = 0; b < shape.batch; ++b) lens[size_t(b)] = to_int(rows.of(b), "sequence length");
  // paddingFill is read as one element of the data type: eight zero bytes are 0 in each.
  static const std::array<unsigned char, 8> zero{};
  void* fill = const_cast<unsigned char*>(zero.data());
  const int32_t T = to_int(shape.steps, "sequence length"), B = to_int(shape.batch, "batch size");
  LOOM_CUDNN_CHECK(cudnnSetRNNDataDescriptor(plan->x_desc.desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T,
                                             B, to_int(k.input_size, "input size"), lens.data(), fill));
  LOOM_CUDNN_CHECK(cudnnSetRNNDataDescriptor(plan->y_desc.desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T,
                                             B, to_int(D * k.hidden_size, "output size"), lens.data(), fill));
  const std::array<int, 3> dims{int(k.num_layers * D), B, int(k.hidden_size)};
  const std::array<int, 3> strides{int(B * k.hidden_size), int(k.hidden_size), 1};
  LOOM_CUDNN_CHECK(cudnnSetTensorNdDescriptor(plan->h_desc.desc, type, 3, dims.data(), strides.data()));
  const cudnnForwardMode_t mode = shape.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  const cudnnStatus_t sized = cudnnGetRNNTempSpaceSizes(handle, layer.rnn.desc, mode, plan->x_desc.desc,
                                                        &plan->work_bytes, &plan->reserve_bytes);
  if (sized == CUDNN_STATUS_NOT_SUPPORTED && layer.algo != CudnnRNNAlgo::Standard) return nullptr;
  check_status(sized, "cudnnGetRNNTempSpaceSizes");
  plan->dev_lengths =
      from_vector<int32_t>(lens, {int64_t(B)}, TensorOptions(kInt32).device(Device(DeviceType::CUDA, k.device)));
  plan->padded = !shape.lengths.empty();
  ++cudnn_rnn_counters().shape_plans;
  return plan;
}

struct Plans {
  std::shared_ptr<LayerPlan> layer;
  std::shared_ptr<const ShapePlan> shape;
};

// This thread's layer plans (Note [cuDNN RNN plans]).
LruCache<CudnnRNNLayerKey, std::shared_ptr<LayerPlan>>& layer_plans() {
  thread_local LruCache<CudnnRNNLayerKey, std::shared_ptr<LayerPlan>> cache(16);
  return cache;
}

// The plans of (key, shape) from this thread's caches, built on a miss. When cuDNN refuses
// key's persistent algorithm (at build time, or at run time: `standard`), the plans cached
// under key run STANDARD from then on (Note [cuDNN RNN algorithm rule]).
Plans plans_for(const CudnnRNNLayerKey& key, const CudnnRNNShapeKey& shape, cudnnHandle_t handle,
                bool standard = false) {
  auto& cache = layer_plans();
  std::shared_ptr<LayerPlan> layer;
  std::shared_ptr<const ShapePlan> shape_plan;
  if (!standard) {
    if (std::shared_ptr<LayerPlan>* hit = cache.find(key)) layer = *hit;
    else layer = build_layer(key, key.algo, handle);  // null: refused
    if (layer) {
      if (auto* hit = layer->shapes.find(shape)) shape_plan = *hit;
      else shape_plan = build_shape(*layer, shape, handle);  // null: refused
    }
  }
  if (!shape_plan) {  // refused: STANDARD, which cuDNN takes for every configuration or throws
    ++cudnn_rnn_counters().algo_fallbacks;
    layer = build_layer(key, CudnnRNNAlgo::Standard, handle);
    shape_plan = build_shape(*layer, shape, handle);
  }
  std::shared_ptr<LayerPlan>* cached = cache.find(key);
  if (cached == nullptr || *cached != layer) cache.insert(key, layer);
  if (layer->shapes.find(shape) == nullptr) layer->shapes.insert(shape, shape_plan);
  return {layer, shape_plan};
}

// ---- packed weights (Note [cuDNN weight packing]) -------------------------------------------------

struct PackedWeights {
  std::shared_ptr<LayerPlan> layer;  // the layout the space has (kept alive: its address is the key's)
  std::vector<TensorStamp> stamps;   // of the weights it holds
  Tensor space;
};

// A weight space of `layer` holding `weights`: the one packed before when they have not
// changed since, else a new one filled now on `stream`. Entries are found by the layer and
// the first weight's storage (one per module and layout).
Tensor packed_weights(const std::shared_ptr<LayerPlan>& layer, const std::vector<Tensor>& weights,
                      cudaStream_t stream) {
  using Key = std::pair<const LayerPlan*, const StorageImpl*>;
  thread_local LruCache<Key, PackedWeights> cache(8);
  // Weights that are gone (autocast's casts of an earlier step) free their spaces now.
  cache.erase_if([](const Key&, const PackedWeights& p) { return any_expired(p.stamps); });
  const Key key{layer.get(), weights[0].impl()->storage.get()};
  if (PackedWeights* hit = cache.find(key); hit != nullptr && stamps_match(hit->stamps, weights)) {
    ++cudnn_rnn_counters().weight_reuses;
    return hit->space;
  }
  Tensor space = device_bytes(layer->space_bytes, Device(DeviceType::CUDA, layer->key.device), true);
  char* base = static_cast<char*>(space.data());
  for (const WeightCopy& c : layer->copies) {
    const Tensor w = weights[c.param].contiguous();
    LOOM_CUDA_CHECK(cudaMemcpyAsync(base + c.space_offset, static_cast<const char*>(w.data()) + c.param_offset,
                                    c.bytes, cudaMemcpyDeviceToDevice, stream));
  }
  ++cudnn_rnn_counters().weight_packs;
  cache.insert(key, PackedWeights{layer, stamps_of(weights), space});
  return space;
}

// LOOM_CUDNN_RNN_ALGO, read once (Note [cuDNN RNN algorithm rule]).
std::optional<CudnnRNNAlgo> algo_override() {
  static const std::optional<CudnnRNNAlgo> value = parse_rnn_algo(std::getenv("LOOM_CUDNN_RNN_ALGO"));
  return value;
}

}  // namespace

struct CudnnRNNSaved : RNNStackSaved {
  Plans plans;
  Tensor space, reserve;           // the weight space forward ran with; cuDNN's reserve
  std::vector<std::optional<Shape>> weight_shapes;  // of the weights given to forward (nullopt: undefined)
};

bool cudnn_runs(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || dtype == kFloat16 ||
         (dtype == kBFloat16 && cudnn_version() >= kCudnnBFloat16Version);
}

RNNStackOutput cudnn_rnn_forward(const RNNStackConfig& config, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths);

// Whether cuDNN runs a bfloat16 layer on `device`: its version says so, and a one-step LSTM
// of zeros goes through (asked once per device; otherwise bfloat16 takes the sweep kernels,
// as with an older cuDNN, rather than failing a training run).
bool cudnn_takes_bfloat16(Device device) {
  if (cudnn_version() < kCudnnBFloat16Version) return false;
  LOOM_ASSERT(device.index >= 0 && device.index < kMaxDevices, "cudnn_rnn: device index ", device.index);
  static std::array<bool, kMaxDevices> takes{};
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[size_t(device.index)], [device] {
    try {
      const TensorOptions opt = TensorOptions(kBFloat16).device(device);
      const RNNStackConfig config{RNNMode::LSTM, 8, 8, 1, false, 0.0, true};
      const std::vector<Tensor> weights{zeros({32, 8}, opt), zeros({32, 8}, opt), zeros({32}, opt), zeros({32}, opt)};
      cudnn_rnn_forward(config, zeros({1, 2, 8}, opt), zeros({1, 2, 8}, opt), zeros({1, 2, 8}, opt), weights, {});
      takes[size_t(device.index)] = true;
    } catch (const Error&) {
      takes[size_t(device.index)] = false;
    }
  });
  return takes[size_t(device.index)];
}

// cuDNN rejects an empty batch or sequence: those take the per-layer kernels.
bool cudnn_rnn_supports(const Tensor& x) {
  if (x.numel() == 0 || !cudnn_runs(x.dtype())) return false;
  return x.dtype() != kBFloat16 || cudnn_takes_bfloat16(x.device());
}

RNNStackOutput cudnn_rnn_forward(const RNNStackConfig& config, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths) {
  LOOM_CHECK(x.is_cuda() && x.dim() == 3 && x.is_contiguous(), ValueError,
             "cudnn_rnn: expected a contiguous (T, B, I) input on a GPU, got shape ", shape_str(x.sizes()), " on ",
             x.device());
  LOOM_CHECK(cudnn_runs(x.dtype()), DTypeError, "cudnn_rnn: cuDNN ", cudnn_version(),
             "'s recurrent layers take float32, float64, float16",
             cudnn_version() >= kCudnnBFloat16Version ? " and bfloat16" : "", ", got ", dtype_name(x.dtype()));
  const int64_t D = config.bidirectional ? 2 : 1, H = config.hidden_size, T = x.size(0), B = x.size(1);
  LOOM_CHECK(int64_t(weights.size()) == 4 * config.num_layers * D, ValueError, "cudnn_rnn: ", weights.size(),
             " weights for ", config.num_layers, " layers and ", D, " directions (expected 4 per layer and direction)");
  LOOM_CHECK(lengths.empty() || int64_t(lengths.size()) == B, ShapeError, "cudnn_rnn: ", lengths.size(),
             " lengths for a batch of ", B);
  check_like_input(x, {hx, cx}, "state");
  check_like_input(x, weights, "weight");
  ::loom::cuda::DeviceGuard guard(x.device());
  const int device = x.device().index;
  const cudaStream_t stream = stream_of(x);
  cudnnHandle_t handle = cudnn_handle(device, stream);

  // The configuration's keys (Note [cuDNN RNN plans]) and its algorithm.
  bool equal_lengths = true;
  for (int64_t len : lengths) equal_lengths &= len == T;
  const DeviceProperties& traits = device_properties(device);
  RNNAlgoQuery query{config.mode, x.dtype(), config.input_size, H, config.num_layers, config.bidirectional,
                     T, B, equal_lengths, config.training, traits.major, traits.minor, traits.sms,
                     are_deterministic_algorithms_enabled()};
  const double dropout = config.num_layers > 1 ? config.dropout : 0.0;
  CudnnRNNLayerKey key;
  key.device = device;
  key.dtype = x.dtype();
  key.mode = config.mode;
  key.input_size = config.input_size;
  key.hidden_size = H;
  key.num_layers = config.num_layers;
  key.bidirectional = config.bidirectional;
  key.bias = weights.size() > 2 && weights[2].defined();
  key.dropout = dropout;
  key.dropout_generation = dropout > 0 ? default_generator().reseeds() : 0;
  key.tf32 = x.dtype() == kFloat32 && ::loom::cuda::allow_tf32();
  key.algo = rnn_algo_for(query, forced_rnn_algo() ? forced_rnn_algo() : algo_override());
  check_weight_sizes(key, weights);
  const CudnnRNNShapeKey shape{T, B, equal_lengths ? std::vector<int64_t>{} : lengths, config.training};

  RNNStackOutput out;
  const TensorOptions opt = x.options();
  out.y = empty({T, B, D * H}, opt);
  out.hy = empty({config.num_layers * D, B, H}, opt);
  const bool lstm = config.mode == RNNMode::LSTM;
  if (lstm) out.cy = empty({config.num_layers * D, B, H}, opt);
  const Tensor h0 = hx.contiguous(), c0 = lstm ? cx.contiguous() : Tensor();
  const cudnnForwardMode_t mode = config.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  auto attempt = [&](const Plans& p, Tensor& space, Tensor& reserve) {
    space = packed_weights(p.layer, weights, stream);
    const Tensor work = device_bytes(p.shape->work_bytes, x.device(), false);
    reserve = device_bytes(p.shape->reserve_bytes, x.device(), false);
    return cudnnRNNForward(handle, p.layer->rnn.desc, mode, p.shape->dev_lengths.data_ptr<int32_t>(),
                           p.shape->x_desc.desc, x.data(), p.shape->y_desc.desc, out.y.data(), p.shape->h_desc.desc,
                           h0.data(), out.hy.data(), p.shape->h_desc.desc, lstm ? c0.data() : nullptr,
                           lstm ? out.cy.data() : nullptr, p.layer->space_bytes, space.data(), p.shape->work_bytes,
                           work.data(), p.shape->reserve_bytes, p.shape->reserve_bytes ? reserve.data() : nullptr);
  };
  Plans plans = plans_for(key, shape, handle);
  Tensor space, reserve;
  cudnnStatus_t status = attempt(plans, space, reserve);
  if (status == CUDNN_STATUS_NOT_SUPPORTED && plans.layer->algo != CudnnRNNAlgo::Standard) {
    plans = plans_for(key, shape, handle, /*standard=*/true);  // refused at run time: STANDARD from now on
    status = attempt(plans, space, reserve);
  }
  check_status(status, "cudnnRNNForward");
  CudnnRNNCounters& counters = cudnn_rnn_counters();
  ++counters.forwards;
  counters.last_algo = plans.layer->algo;
  if (config.training) {
    auto saved = std::make_shared<CudnnRNNSaved>();
    saved->plans = plans;
    saved->space = space;
    saved->reserve = reserve;
    for (const Tensor& w : weights)
      saved->weight_shapes.push_back(w.defined() ? std::optional<Shape>(w.sizes()) : std::nullopt);
    out.saved = std::move(saved);
  }
  return out;
}

RNNStackGrads cudnn_rnn_backward(const RNNStackSaved& saved, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const Tensor& y, const Tensor& dy, const Tensor& dhy, const Tensor& dcy) {
  // The saved state is forward's CudnnRNNSaved; cuDNN writes its reserve space in backward.
  const CudnnRNNSaved& s = static_cast<const CudnnRNNSaved&>(saved);
  const LayerPlan& layer = *s.plans.layer;
  const ShapePlan& shape = *s.plans.shape;
  ::loom::cuda::DeviceGuard guard(x.device());
  const cudaStream_t stream = stream_of(x);
  cudnnHandle_t handle = cudnn_handle(x.device().index, stream);
  const bool lstm = layer.key.mode == RNNMode::LSTM;
  const TensorOptions opt = x.options();
  const Tensor dy_c = dy.defined() ? dy.contiguous() : zeros(y.sizes(), opt);
  const Tensor dhy_c = dhy.defined() ? dhy.contiguous() : Tensor();
  const Tensor dcy_c = lstm && dcy.defined() ? dcy.contiguous() : Tensor();
  const Tensor h0 = hx.contiguous(), c0 = lstm ? cx.contiguous() : Tensor();
  Tensor work = device_bytes(shape.work_bytes, x.device(), false);
  void* reserve = shape.reserve_bytes ? s.reserve.data() : nullptr;

  RNNStackGrads g;
  // cuDNN documents the padding fill for outputs only: with lengths, zero dx so that
  // positions past a sequence's length hold 0 (Note [recurrent layer rules]), whatever
  // cuDNN leaves there; without, cuDNN writes every element.
  g.dx = shape.padded ? zeros(x.sizes(), opt) : empty(x.sizes(), opt);
  g.dhx = empty(hx.sizes(), opt);
  if (lstm) g.dcx = empty(cx.sizes(), opt);
  LOOM_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      handle, layer.rnn.desc, shape.dev_lengths.data_ptr<int32_t>(), shape.y_desc.desc, y.data(), dy_c.data(),
      shape.x_desc.desc, g.dx.data(), shape.h_desc.desc, h0.data(), dhy_c.defined() ? dhy_c.data() : nullptr,
      g.dhx.data(), shape.h_desc.desc, lstm ? c0.data() : nullptr, dcy_c.defined() ? dcy_c.data() : nullptr,
      lstm ? g.dcx.data() : nullptr, layer.space_bytes, s.space.data(), shape.work_bytes, work.data(),
      shape.reserve_bytes, reserve));
  // cuDNN adds into the weight-gradient space (CUDNN_WGRAD_MODE_ADD is its only mode).
  Tensor dspace = device_bytes(layer.space_bytes, x.device(), true);
  LOOM_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(handle, layer.rnn.desc, CUDNN_WGRAD_MODE_ADD,
                                              shape.dev_lengths.data_ptr<int32_t>(), shape.x_desc.desc, x.data(),
                                              shape.h_desc.desc, h0.data(), shape.y_desc.desc, y.data(),
                                              layer.space_bytes, dspace.data(), shape.work_bytes, work.data(),
                                              shape.reserve_bytes, reserve));
  g.dweights.resize(s.weight_shapes.size());
  for (size_t k = 0; k < g.dweights.size(); ++k)
    if (s.weight_shapes[k]) g.dweights[k] = empty(*s.weight_shapes[k], opt);
  const char* dbase = static_cast<const char*>(dspace.data());
  for (const WeightCopy& c : layer.copies)
    LOOM_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(g.dweights[c.param].data()) + c.param_offset,
                                    dbase + c.space_offset, c.bytes, cudaMemcpyDeviceToDevice, stream));
  ++cudnn_rnn_counters().backwards;
  return g;
}

void add_cudnn_rnn_kernels(Backend& b) {
  b.rnn_stack_supports = &cudnn_rnn_supports;
  b.rnn_stack_forward = &cudnn_rnn_forward;
  b.rnn_stack_backward = &cudnn_rnn_backward;
}

}  // namespace loom::kernels::cuda

#else  // built without cuDNN: the layers run the sweep kernels (kernels/cuda/rnn.cu)

namespace loom::kernels::cuda {
void add_cudnn_rnn_kernels(Backend&) {}
}  // namespace loom::kernels::cuda

#endif
