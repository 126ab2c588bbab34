// What autocast (autograd/autocast.h) does to each op's floating inputs, per device.
//
// Note [autocast policy]
// PyTorch's cast lists, kept as data: the elementwise and reduction ops carry their
// policy in their op-table row (kernels/math/elementwise_ops.h, the `autocast` column), and
// the other ops that autocast touches have a row in kAutocastOps below. An op named in
// neither runs in its inputs' dtypes. The lists differ per device, and PyTorch's behaviour
// on each device is the spec:
// - CUDA: aten/src/ATen/autocast_mode.h (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
//   AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_PROMOTE).
//   And aten/src/ATen/cudnn/AutocastRNN.cpp for the recurrent layers (Note [recurrent
//   layers under CUDA autocast]).
// - CPU: autocast_mode.cpp's CPU lists, which are shorter: softmax, log_softmax,
//   layer_norm, exp, log, pow, sum and cumsum keep a bfloat16 input in bfloat16 there
//   (measured with PyTorch 2.15: tests/golden/data/autocast_cpu.json).
//
// Note [recurrent layers under CUDA autocast]
// PyTorch's CUDA autocast does not list lstm, gru, rnn_tanh or rnn_relu: it wraps the
// cuDNN call they make (_cudnn_rnn, registered for AutocastCUDA in
// aten/src/ATen/cudnn/AutocastRNN.cpp, as torch._C._dispatch_dump("aten::_cudnn_rnn")
// shows in PyTorch 2.15), and that wrapper casts the input, the states and the weights to
// float16 whatever the autocast dtype: under bfloat16 autocast too, nn.LSTM on a GPU
// returns float16. Loom does the same (CastPolicy::Float16). The cells (lstm_cell,
// gru_cell, rnn_tanh_cell, rnn_relu_cell) are on the lower-precision list: the autocast
// dtype, float16 or bfloat16.
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
  Float16,         // float32 / bfloat16 inputs become float16, whatever the autocast dtype
                   // (Note [recurrent layers under CUDA autocast])
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
    {"bmm", kCastToLower},
    {"baddbmm", kCastToLower},
    {"addmm", kCastToLower},
    {"linear", kCastToLower},
    // The recurrent layers and cells. On the CPU as PyTorch 2.15 runs them under CPU
    // autocast (tests/golden/data/autocast_cpu.json): LSTM and RNN (tanh, relu) and RNNCell
    // in the lower precision; GRU, LSTMCell and GRUCell in their inputs' dtype, their
    // weights following a 16-bit input (nn/rnn.cpp). On CUDA as PyTorch's CUDA autocast:
    // the layers in float16, the cells in the lower precision (Note [recurrent layers
    // under CUDA autocast]).
    {"lstm", {CastPolicy::LowerPrecision, CastPolicy::Float16}},
    {"rnn", {CastPolicy::LowerPrecision, CastPolicy::Float16}},
    {"gru", {CastPolicy::Keep, CastPolicy::Float16}},
    {"rnn_cell", kCastToLower},
    {"lstm_cell", {CastPolicy::Keep, CastPolicy::LowerPrecision}},
    {"gru_cell", {CastPolicy::Keep, CastPolicy::LowerPrecision}},
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
