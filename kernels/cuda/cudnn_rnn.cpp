// nn::RNN / LSTM / GRU on a GPU through cuDNN's RNN API (cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8): the whole stack of layers and
// directions in one call — the CUDA backend's kernels::rnn_stack_forward/backward
// (kernels/kernels.h). Compiled to nothing but an empty registration without cuDNN
// (LOOM_WITH_CUDNN), where the layers run the sweep kernels of kernels/cuda/rnn.cu.
// float16 (the layers under CUDA autocast: Note [recurrent layers under CUDA autocast])
// runs on tensor cores with float32 math (CUDNN_TENSOR_OP_MATH, math precision
// CUDNN_DATA_FLOAT), as PyTorch's; every tensor, the weights included, is in the input's
// dtype (autocast's casts), and so are the gradients, which the casts' backward widens to
// the parameters' float32. bfloat16 takes the sweep kernels (Note [16-bit recurrent
// layers]): cuDNN takes it only from 9.13 on.
//
// Note [cuDNN weight packing]
// cuDNN keeps every weight and bias in one flat "weight space" whose layout it chooses;
// cudnnGetRNNWeightParams gives the address of each (pseudo-layer, gate matrix). Loom's
// parameters stay PyTorch's separate tensors (w_ih (G·H, I): gate g is rows g·H..g·H+H,
// in PyTorch's gate order, which is cuDNN's: LSTM i f g o, GRU r z n). Each forward
// copies them into a fresh weight space (device-to-device, one copy per contiguous run),
// which backward keeps, and backward copies the weight-gradient space back out into one
// gradient per parameter through the same map. The copies are small next to the
// recurrence (the weights are read T times by it).
#include "kernels/cuda/backend.h"

#ifdef LOOM_WITH_CUDNN

#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <limits>
#include <map>

#include "core/cuda.h"
#include "core/factories.h"
#include "core/generator.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/rnn_rules.h"

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

cudnnDataType_t data_type(DType d) {
  switch (d) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::Float16: return CUDNN_DATA_HALF;
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

void set_dropout(cudnnDropoutDescriptor_t desc, cudnnHandle_t handle, double p, const Tensor& like) {
  if (p == 0) {  // no states needed: nothing is drawn
    LOOM_CUDNN_CHECK(cudnnSetDropoutDescriptor(desc, handle, 0.f, nullptr, 0, 0));
    return;
  }
  thread_local std::map<int, DropoutStates> per_device;
  DropoutStates& s = per_device[like.device().index];
  Generator& g = default_generator();
  if (!s.states.defined() || s.reseeds != g.reseeds()) {
    size_t bytes = 0;
    LOOM_CUDNN_CHECK(cudnnDropoutGetStatesSize(handle, &bytes));
    if (!s.states.defined()) s.states = device_bytes(bytes, like.device(), false);
    s.bytes = bytes;
    s.reseeds = g.reseeds();
    s.seed = Philox::block(g.seed(), g.reserve(1))[0];
    LOOM_CUDNN_CHECK(cudnnSetDropoutDescriptor(desc, handle, float(p), s.states.data(), bytes, s.seed));
  } else {
    LOOM_CUDNN_CHECK(cudnnRestoreDropoutDescriptor(desc, handle, float(p), s.states.data(), s.bytes,
                                                   s.seed));
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

// w_ih (G·H, I or D·H), w_hh (G·H, H), b_ih and b_hh (G·H) per layer and direction: the
// copies of the weight map read whole gate blocks of them.
void check_weight_sizes(const RNNStackConfig& c, const std::vector<Tensor>& weights) {
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size, GH = rnn_gates(c.mode) * H;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const int64_t in = layer == 0 ? c.input_size : D * H;
    for (int64_t k = layer * D; k < (layer + 1) * D; ++k) {
      const Tensor* w = &weights[size_t(4 * k)];
      const Shape expected[4] = {{GH, in}, {GH, H}, {GH}, {GH}};
      for (int i = 0; i < 4; ++i)
        LOOM_CHECK((i >= 2 && !w[i].defined()) || (w[i].defined() && w[i].sizes() == expected[i]), ShapeError,
                   "cudnn_rnn: weight ", i, " of layer ", layer, " has shape ",
                   w[i].defined() ? shape_str(w[i].sizes()) : std::string("(undefined)"), ", expected ",
                   shape_str(expected[i]));
    }
  }
}

}  // namespace

struct CudnnRNNSaved : RNNStackSaved {
  RNNStackConfig config;
  DType dtype;
  int64_t T, B;
  DropoutDesc dropout;  // referenced by rnn: declared first, destroyed last
  RNNDesc rnn;
  DataDesc x_desc, y_desc;
  TensorDesc h_desc;
  Tensor dev_lengths;   // int32 (B)
  Tensor weight_space, reserve;  // device_bytes buffers
  size_t space_bytes = 0, reserve_bytes = 0;
  std::vector<WeightCopy> copies;
  std::vector<Tensor> weight_shapes_of;  // the weights given to forward (shapes, dtypes; for dweights)
};

bool cudnn_runs(DType dtype) { return dtype == kFloat32 || dtype == kFloat64 || dtype == kFloat16; }

// cuDNN rejects an empty batch or sequence: those take the per-layer kernels.
bool cudnn_rnn_supports(const Tensor& x) { return cudnn_runs(x.dtype()) && x.numel() > 0; }

namespace {

// Fills the descriptors of `s` for input x; returns the handle bound to x's stream.
cudnnHandle_t describe(CudnnRNNSaved& s, const Tensor& x, const std::vector<int64_t>& lengths) {
  const RNNStackConfig& c = s.config;
  cudnnHandle_t handle = cudnn_handle(x.device().index, stream_of(x));
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size;
  const cudnnDataType_t type = data_type(s.dtype);
  const cudnnDataType_t math_prec = s.dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  // float32 runs TF32 tensor cores only when allowed (as matmul); float16 uses them.
  const cudnnMathType_t math = s.dtype == kFloat16   ? CUDNN_TENSOR_OP_MATH
                               : s.dtype == kFloat64 ? CUDNN_DEFAULT_MATH
                               : ::loom::cuda::allow_tf32() ? CUDNN_DEFAULT_MATH
                                                            : CUDNN_FMA_MATH;
  set_dropout(s.dropout.desc, handle, c.num_layers > 1 ? c.dropout : 0.0, x);
  const bool bias = s.weight_shapes_of.size() > 2 && s.weight_shapes_of[2].defined();
  LOOM_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      s.rnn.desc, CUDNN_RNN_ALGO_STANDARD, cell_mode(c.mode), bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
      c.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, type, math_prec, math,
      to_int(c.input_size, "input size"), to_int(H, "hidden size"), to_int(H, "projection size"),
      to_int(c.num_layers, "num_layers"), s.dropout.desc, CUDNN_RNN_PADDED_IO_ENABLED));

  // Each row's length (Note [recurrent layer rules]), for the descriptors and the device.
  LOOM_CHECK(lengths.empty() || int64_t(lengths.size()) == s.B, ShapeError, "cudnn_rnn: ", lengths.size(),
             " lengths for a batch of ", s.B);
  const rnn_rules::Lengths rows = rnn_rules::host_lengths(lengths, s.T);
  std::vector<int32_t> lens(size_t(s.B));
  for (int64_t b = 0; b < s.B; ++b) lens[size_t(b)] = to_int(rows.of(b), "sequence length");
  // paddingFill is read as one element of the data type: eight zero bytes are 0 in each.
  static const std::array<unsigned char, 8> zero{};
  void* fill = const_cast<unsigned char*>(zero.data());
  const int32_t T = to_int(s.T, "sequence length"), B = to_int(s.B, "batch size");
  LOOM_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.x_desc.desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B,
                                             to_int(c.input_size, "input size"), lens.data(), fill));
  LOOM_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.y_desc.desc, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B,
                                             to_int(D * H, "output size"), lens.data(), fill));
  const std::array<int, 3> dims{int(c.num_layers * D), B, int(H)};
  const std::array<int, 3> strides{int(B * H), int(H), 1};
  LOOM_CUDNN_CHECK(cudnnSetTensorNdDescriptor(s.h_desc.desc, type, 3, dims.data(), strides.data()));
  s.dev_lengths = from_vector<int32_t>(lens, {int64_t(B)}, TensorOptions(kInt32).device(x.device()));
  return handle;
}

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

// The weight map (Note [cuDNN weight packing]): for every pseudo-layer (layer · D + dir)
// and gate matrix, where cuDNN keeps it and which rows of which parameter it is.
std::vector<WeightCopy> weight_map(cudnnHandle_t handle, const CudnnRNNSaved& s, size_t space_bytes) {
  const RNNStackConfig& c = s.config;
  const int64_t D = c.bidirectional ? 2 : 1, H = c.hidden_size, G = rnn_gates(c.mode);
  const size_t elem = size_t(element_size(s.dtype));
  char* base = static_cast<char*>(s.weight_space.data());
  TensorDesc m_desc, b_desc;
  std::vector<WeightCopy> matrices, biases;
  for (int64_t pseudo = 0; pseudo < c.num_layers * D; ++pseudo) {
    const size_t first = size_t(4 * pseudo);  // w_ih, w_hh, b_ih, b_hh of this layer/direction
    for (int64_t id = 0; id < 2 * G; ++id) {
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      LOOM_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, s.rnn.desc, int32_t(pseudo), space_bytes, base, int32_t(id),
                                               m_desc.desc, &m_addr, b_desc.desc, &b_addr));
      const bool recurrent = id >= G;
      const int64_t gate = id % G;
      const Tensor& w = s.weight_shapes_of[first + (recurrent ? 1 : 0)];
      const size_t m_bytes = size_t(H * w.size(1)) * elem;
      LOOM_CHECK(m_addr != nullptr, InternalError, "cudnn_rnn: cuDNN gave no address for matrix ", id,
                 " of pseudo-layer ", pseudo);
      LOOM_CHECK(described_elements(m_desc.desc) == H * w.size(1), InternalError, "cudnn_rnn: cuDNN's matrix ", id,
                 " of pseudo-layer ", pseudo, " has ", described_elements(m_desc.desc), " elements, expected ", H,
                 " x ", w.size(1), " (a gate's rows of ", shape_str(w.sizes()), ")");
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
  for (const WeightCopy& m : matrices) {
    LOOM_CHECK(m.space_offset + m.bytes <= space_bytes, InternalError,
               "cudnn_rnn: cuDNN's weight layout does not fit its weight space");
  }
  matrices.insert(matrices.end(), biases.begin(), biases.end());
  return matrices;
}

void copy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

RNNStackOutput cudnn_rnn_forward(const RNNStackConfig& config, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths) {
  LOOM_CHECK(x.is_cuda() && x.dim() == 3 && x.is_contiguous(), ValueError,
             "cudnn_rnn: expected a contiguous (T, B, I) input on a GPU, got shape ", shape_str(x.sizes()), " on ",
             x.device());
  LOOM_CHECK(cudnn_runs(x.dtype()), DTypeError, "cudnn_rnn: cuDNN's recurrent layers take float32, float64 ",
             "and float16, got ", dtype_name(x.dtype()));
  const int64_t D = config.bidirectional ? 2 : 1, H = config.hidden_size;
  LOOM_CHECK(int64_t(weights.size()) == 4 * config.num_layers * D, ValueError, "cudnn_rnn: ", weights.size(),
             " weights for ", config.num_layers, " layers and ", D, " directions (expected 4 per layer and direction)");
  check_like_input(x, {hx, cx}, "state");
  check_like_input(x, weights, "weight");
  check_weight_sizes(config, weights);
  ::loom::cuda::DeviceGuard guard(x.device());
  auto s = std::make_shared<CudnnRNNSaved>();
  s->config = config;
  s->dtype = x.dtype();
  s->T = x.size(0);
  s->B = x.size(1);
  s->weight_shapes_of = weights;
  cudnnHandle_t handle = describe(*s, x, lengths);
  const cudaStream_t stream = stream_of(x);

  size_t space_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  LOOM_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, s->rnn.desc, &space_bytes));
  const cudnnForwardMode_t mode = config.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  LOOM_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle, s->rnn.desc, mode, s->x_desc.desc, &work_bytes, &reserve_bytes));
  s->space_bytes = space_bytes;
  s->reserve_bytes = reserve_bytes;
  s->weight_space = device_bytes(space_bytes, x.device(), true);
  s->copies = weight_map(handle, *s, space_bytes);
  char* space = static_cast<char*>(s->weight_space.data());
  for (const WeightCopy& c : s->copies) {
    const Tensor w = weights[c.param].contiguous();
    copy_async(space + c.space_offset, static_cast<const char*>(w.data()) + c.param_offset, c.bytes, stream);
  }
  Tensor work = device_bytes(work_bytes, x.device(), false);
  s->reserve = device_bytes(reserve_bytes, x.device(), false);

  RNNStackOutput out;
  const TensorOptions opt = x.options();
  out.y = empty({s->T, s->B, D * H}, opt);
  out.hy = empty({config.num_layers * D, s->B, H}, opt);
  const bool lstm = config.mode == RNNMode::LSTM;
  if (lstm) out.cy = empty({config.num_layers * D, s->B, H}, opt);
  const Tensor h0 = hx.contiguous(), c0 = lstm ? cx.contiguous() : Tensor();
  LOOM_CUDNN_CHECK(cudnnRNNForward(handle, s->rnn.desc, mode, s->dev_lengths.data_ptr<int32_t>(), s->x_desc.desc,
                                   x.data(), s->y_desc.desc, out.y.data(), s->h_desc.desc, h0.data(), out.hy.data(),
                                   s->h_desc.desc, lstm ? c0.data() : nullptr, lstm ? out.cy.data() : nullptr,
                                   space_bytes, space, work_bytes, work.data(), reserve_bytes,
                                   reserve_bytes ? s->reserve.data() : nullptr));
  if (config.training) out.saved = std::move(s);
  return out;
}

RNNStackGrads cudnn_rnn_backward(const RNNStackSaved& saved, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const Tensor& y, const Tensor& dy, const Tensor& dhy, const Tensor& dcy) {
  // The saved state is forward's CudnnRNNSaved; cuDNN writes its reserve space in backward.
  CudnnRNNSaved& s = const_cast<CudnnRNNSaved&>(static_cast<const CudnnRNNSaved&>(saved));
  ::loom::cuda::DeviceGuard guard(x.device());
  cudnnHandle_t handle = cudnn_handle(x.device().index, stream_of(x));
  const cudaStream_t stream = stream_of(x);
  const bool lstm = s.config.mode == RNNMode::LSTM;
  const TensorOptions opt = x.options();
  const Tensor dy_c = dy.defined() ? dy.contiguous() : zeros(y.sizes(), opt);
  const Tensor dhy_c = dhy.defined() ? dhy.contiguous() : Tensor();
  const Tensor dcy_c = lstm && dcy.defined() ? dcy.contiguous() : Tensor();
  const Tensor h0 = hx.contiguous(), c0 = lstm ? cx.contiguous() : Tensor();
  size_t work_bytes = 0, reserve_bytes = 0;
  LOOM_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle, s.rnn.desc, CUDNN_FWD_MODE_TRAINING, s.x_desc.desc, &work_bytes,
                                             &reserve_bytes));
  LOOM_CHECK(reserve_bytes == s.reserve_bytes, InternalError,
             "cudnn_rnn: the reserve space changed size between forward and backward");
  Tensor work = device_bytes(work_bytes, x.device(), false);
  const size_t space_bytes = s.space_bytes;

  RNNStackGrads g;
  // cuDNN documents the padding fill for outputs only: zero dx so that positions past a
  // sequence's length hold 0 (Note [recurrent layer rules]), whatever cuDNN leaves there.
  g.dx = zeros(x.sizes(), opt);
  g.dhx = empty(hx.sizes(), opt);
  if (lstm) g.dcx = empty(cx.sizes(), opt);
  void* reserve = reserve_bytes ? s.reserve.data() : nullptr;
  LOOM_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      handle, s.rnn.desc, s.dev_lengths.data_ptr<int32_t>(), s.y_desc.desc, y.data(), dy_c.data(), s.x_desc.desc,
      g.dx.data(), s.h_desc.desc, h0.data(), dhy_c.defined() ? dhy_c.data() : nullptr, g.dhx.data(), s.h_desc.desc,
      lstm ? c0.data() : nullptr, dcy_c.defined() ? dcy_c.data() : nullptr, lstm ? g.dcx.data() : nullptr,
      space_bytes, s.weight_space.data(), work_bytes, work.data(), reserve_bytes, reserve));
  // cuDNN adds into the weight-gradient space (CUDNN_WGRAD_MODE_ADD is its only mode).
  Tensor dspace = device_bytes(space_bytes, x.device(), true);
  LOOM_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(handle, s.rnn.desc, CUDNN_WGRAD_MODE_ADD,
                                              s.dev_lengths.data_ptr<int32_t>(), s.x_desc.desc, x.data(),
                                              s.h_desc.desc, h0.data(), s.y_desc.desc, y.data(), space_bytes,
                                              dspace.data(), work_bytes, work.data(), reserve_bytes, reserve));
  g.dweights.resize(s.weight_shapes_of.size());
  for (size_t k = 0; k < g.dweights.size(); ++k)
    if (s.weight_shapes_of[k].defined()) g.dweights[k] = empty(s.weight_shapes_of[k].sizes(), opt);
  const char* dbase = static_cast<const char*>(dspace.data());
  for (const WeightCopy& c : s.copies)
    copy_async(static_cast<char*>(g.dweights[c.param].data()) + c.param_offset, dbase + c.space_offset, c.bytes,
               stream);
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
