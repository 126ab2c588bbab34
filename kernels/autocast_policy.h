// What autocast (autograd/autocast.h) does to each op's floating inputs, per device.
//
// Note [autocast policy]
// PyTorch's cast lists, kept as data: the elementwise and reduction ops carry their
// policy in their op-table row (kernels/elementwise_ops.h, the `autocast` column), and
// the other ops that autocast touches have a row in kAutocastOps below. An op named in
// neither runs in its inputs' dtypes. The lists differ per device, and PyTorch's behaviour
// on each device is the spec:
// - CUDA: aten/src/ATen/autocast_mode.h (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
//   AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_PROMOTE).
// - CPU: autocast_mode.cpp's CPU lists, which are shorter: softmax, log_softmax,
//   layer_norm, exp, log, pow, sum and cumsum keep a bfloat16 input in bfloat16 there
//   (measured with PyTorch 2.15: tests/golden/autocast_cpu.json).
// (Loom has no binary_cross_entropy on probabilities, which PyTorch bans under CUDA
// autocast: binary_cross_entropy_with_logits is the op to use, in float32 on both.)
// cat, stack and where are on PyTorch's promote lists; Loom's (as PyTorch's) promote
// their inputs to a common dtype anyway, so autocast has nothing to add there.
#pragma once

namespace loom::kernels {

enum class CastPolicy : unsigned char {
  Keep,            // not listed: run in the inputs' dtypes
  LowerPrecision,  // float32 inputs become the autocast dtype (float16 / bfloat16)
  Float32,         // float16 / bfloat16 inputs become float32
};

struct AutocastPolicy {
  CastPolicy cpu, cuda;
};

// The policies the tables use.
inline constexpr AutocastPolicy kNoCast{CastPolicy::Keep, CastPolicy::Keep};
inline constexpr AutocastPolicy kCastToLower{CastPolicy::LowerPrecision, CastPolicy::LowerPrecision};
inline constexpr AutocastPolicy kCastToFloat32{CastPolicy::Float32, CastPolicy::Float32};
inline constexpr AutocastPolicy kCastToFloat32OnCuda{CastPolicy::Keep, CastPolicy::Float32};

struct AutocastOpInfo {
  const char* name;  // as the op's error messages name it
  AutocastPolicy policy;
};

inline constexpr AutocastOpInfo kAutocastOps[] = {
    // GEMMs: the lower precision on both devices.
    {"matmul", kCastToLower},
    {"mm", kCastToLower},
    {"linear", kCastToLower},
    // The recurrent layers and cells, as PyTorch 2.15 runs them under CPU autocast
    // (tests/golden/data/autocast_cpu.json): LSTM and RNN (tanh, relu) and RNNCell in the
    // lower precision; GRU, LSTMCell and GRUCell in their inputs' dtype, their weights
    // following a 16-bit input (nn/rnn.cpp). On CUDA float32, for now: Loom's 16-bit
    // recurrent kernels have not yet run on a GPU (PyTorch runs them all in float16 there).
    {"lstm", {CastPolicy::LowerPrecision, CastPolicy::Float32}},
    {"rnn", {CastPolicy::LowerPrecision, CastPolicy::Float32}},
    {"gru", kCastToFloat32OnCuda},
    {"rnn_cell", {CastPolicy::LowerPrecision, CastPolicy::Float32}},
    {"lstm_cell", kCastToFloat32OnCuda},
    {"gru_cell", kCastToFloat32OnCuda},
    // Numerically sensitive: float32 on CUDA, the input's dtype on the CPU.
    {"softmax", kCastToFloat32OnCuda},
    {"log_softmax", kCastToFloat32OnCuda},
    {"layer_norm", kCastToFloat32OnCuda},
    {"cumsum", kCastToFloat32OnCuda},
    {"logsumexp", kCastToFloat32OnCuda},
    {"norm", kCastToFloat32OnCuda},
    // Losses: float32 on both.
    {"cross_entropy", kCastToFloat32},
    {"nll_loss", kCastToFloat32},
    {"mse_loss", kCastToFloat32},
    {"l1_loss", kCastToFloat32},
    {"smooth_l1_loss", kCastToFloat32},
    {"binary_cross_entropy_with_logits", kCastToFloat32},
};

constexpr bool same_name(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

// The policy of a named op; kNoCast for one without a row.
constexpr AutocastPolicy autocast_policy(const char* op) {
  for (const AutocastOpInfo& row : kAutocastOps)
    if (same_name(row.name, op)) return row.policy;
  return kNoCast;
}

}  // namespace loom::kernels
