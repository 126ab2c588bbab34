// A device backend: one table of kernel entry points per device type, which the device-
// neutral entry points of kernels/kernels.h (defined in kernels/router.cpp) look up.
//
// Note [kernel routing]
// Every entry point of kernels/kernels.h is defined once, in kernels/router.cpp: it checks
// that its operands share one device (and whatever else holds for every device), picks
// that device's Backend and calls the slot. Each slot's type is the entry point's own
// (decltype), so a kernel's signature is written once, in kernels/kernels.h. A backend
// fills its table from its own files (kernels/cpu/backend.cpp, kernels/cuda/backend.cpp);
// a slot it leaves empty is an op the device has no kernel for, and calling it is a
// DeviceError naming the op and the device.
//
// The CPU backend always exists. The CUDA one comes from whichever file the build compiles
// (the LOOM_ENABLE_CUDA option picks it, so no #ifdef is needed): kernels/cuda/backend.cpp
// with the CUDA backend, kernels/cuda_emulation_backend.cpp without it (the CPU table while
// the host-emulated cuda:0 is on, core/cuda_emulation.h; none otherwise).
#pragma once

#include "kernels/attention/attention.h"
#include "kernels/kernels.h"
#include "kernels/norm/layer_norm.h"

namespace loom::kernels {

struct Backend {
  const char* name;  // "CPU", "CUDA": for error messages

  decltype(&kernels::unary) unary = nullptr;
  decltype(&kernels::binary) binary = nullptr;
  decltype(&kernels::where) where = nullptr;
  decltype(&kernels::copy) copy = nullptr;
  decltype(&kernels::copy_across_devices) copy_across_devices = nullptr;
  decltype(&kernels::fill) fill = nullptr;

  decltype(&kernels::uniform) uniform = nullptr;
  decltype(&kernels::normal) normal = nullptr;
  void (*bernoulli)(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset) = nullptr;
  void (*bernoulli_scalar)(const Tensor& dst, double p, uint64_t seed, uint64_t offset) = nullptr;
  decltype(&kernels::randint) randint = nullptr;
  decltype(&kernels::multinomial) multinomial = nullptr;

  decltype(&kernels::reduce) reduce = nullptr;
  decltype(&kernels::arg_reduce) arg_reduce = nullptr;
  decltype(&kernels::variance) variance = nullptr;
  decltype(&kernels::cumsum) cumsum = nullptr;
  decltype(&kernels::sort) sort = nullptr;
  decltype(&kernels::softmax) softmax = nullptr;
  decltype(&kernels::softmax_backward) softmax_backward = nullptr;
  decltype(&kernels::bmm) bmm = nullptr;
  decltype(&kernels::attention_forward) attention_forward = nullptr;
  decltype(&kernels::attention_backward) attention_backward = nullptr;
  // Why those two would not take q (N, L, E) and v (N, S, Ev): dtype, head dims; "" when
  // they would (kernels::attention_refusal). Left empty: they take every float dtype.
  std::string (*attention_refusal)(const Tensor& q, const Tensor& v) = nullptr;
  // cuDNN's attention graphs and why they would not take a call (kernels::attention_refusal);
  // a backend without them leaves these empty.
  decltype(&kernels::cudnn_attention_forward) cudnn_attention_forward = nullptr;
  decltype(&kernels::cudnn_attention_backward) cudnn_attention_backward = nullptr;
  std::string (*cudnn_attention_refusal)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                                         bool causal, double dropout_p, bool needs_backward) = nullptr;
  // Fused layer norm; a backend without it leaves these empty and layer_norm composes ops.
  decltype(&kernels::layer_norm_forward) layer_norm_forward = nullptr;
  decltype(&kernels::layer_norm_backward) layer_norm_backward = nullptr;

  decltype(&kernels::index_select) index_select = nullptr;
  decltype(&kernels::index_add) index_add = nullptr;
  decltype(&kernels::gather) gather = nullptr;
  decltype(&kernels::scatter_add) scatter_add = nullptr;
  decltype(&kernels::triangle) triangle = nullptr;
  decltype(&kernels::check_indices) check_indices = nullptr;
  decltype(&kernels::check_class_targets) check_class_targets = nullptr;
  decltype(&kernels::check_sequence_lengths) check_sequence_lengths = nullptr;

  decltype(&kernels::rnn_layer_forward) rnn_layer_forward = nullptr;
  decltype(&kernels::rnn_layer_backward) rnn_layer_backward = nullptr;
  // A whole stack of recurrent layers in one call (cuDNN); a backend without one leaves
  // these empty and the layers run one rnn_layer_forward per layer and direction.
  bool (*rnn_stack_supports)(const Tensor& x) = nullptr;
  decltype(&kernels::rnn_stack_forward) rnn_stack_forward = nullptr;
  decltype(&kernels::rnn_stack_backward) rnn_stack_backward = nullptr;

  decltype(&kernels::sgd_update) sgd_update = nullptr;
  decltype(&kernels::adam_update) adam_update = nullptr;
  decltype(&kernels::rmsprop_update) rmsprop_update = nullptr;

  decltype(&kernels::unscale_grads) unscale_grads = nullptr;
  decltype(&kernels::update_scale) update_scale = nullptr;

  decltype(&kernels::multi_tensor_norm) multi_tensor_norm = nullptr;
};

// The backends (kernels/cpu/backend.cpp; kernels/cuda/backend.cpp or
// kernels/cuda_emulation_backend.cpp). cuda_backend() is null when there is none.
const Backend& cpu_backend();
const Backend* cuda_backend();

// The backend of `device`: DeviceError naming `op` when the build has none for it.
const Backend& backend_for(Device device, const char* op);

}  // namespace loom::kernels
