// What a cuDNN attention graph depends on (the key of the plan cache) and the rules by
// which cuDNN refuses a call before any graph is built. Host code without CUDA, so the host
// tests check the keys and the rules; the graphs themselves are built and run in
// kernels/cuda/cudnn_attention.cpp.
//
// Note [cuDNN attention plans]
// cuDNN runs attention as graphs (its SDPA forward and backward operations) that the
// frontend validates, lowers and plans, which takes milliseconds, and that then execute
// with the operands' pointers. So a graph is built once per AttentionSignature: the
// device, the dtype, (B, H, L, S, E, Ev), the strides of q, k, v and out (the gradients
// are made in their operands' layout and grad_out in out's, so these fix every tensor of
// both graphs), the mask's kind and strides, causal, the dropout probability and whether
// deterministic mode was on (its backward graph is another: below). What
// changes between calls of one signature goes in at execution: the pointers, the scale, the
// dropout seed and offset, a padding mask's lengths, the workspace (from Loom's caching
// allocator). Built graphs stay in a per-thread cache bounded to kCudnnPlanCacheCapacity
// signatures, the least recently used dropped first (kernels/support/lru_cache.h): cuDNN's plans
// are not to be shared between threads, as PyTorch keeps its own per thread. A signature
// cuDNN refused is cached with its reason, so that a training step whose shapes repeat
// builds no graph at all, refused or not.
// Before anything is built, refusal_by_cudnn_rules applies the rules cuDNN's frontend and
// Hopper's tensor memory accelerator are known to apply (below), so a call sure to be
// refused costs no build; what they do not foresee, the build itself reports.
// Deterministic mode (Note [deterministic algorithms] in core/deterministic.h): the backward
// graph is built with the frontend's SDPA_backward_attributes::set_deterministic_algorithm,
// which lowers it with a dP workspace: dq is then one GEMM over the stored dP instead of a
// float32 accumulator that every tile of keys adds into with atomics (the default). The
// workspace is B·H·L·S 16-bit values (rounded up to tiles of 64), what the MATH tier would
// materialise anyway. On Blackwell the frontend takes it only from cuDNN 9.18 and without
// dropout; its refusal then sends the call to MATH, as any other.
// Masks: an additive mask is cuDNN's bias, with stride 0 on its broadcast dims, as PyTorch
// passes it. A key-padding mask (one row of S per batch entry: stride 0 over H and L, what
// MultiheadAttention makes of a key_padding_mask and the Transformer encoder of lengths)
// is also cuDNN's padding mask: each entry's key count is the index past its last key the
// mask keeps, found on the GPU without a sync (kernels/cuda/cudnn_attention_masks.cu), so
// cuDNN skips the padded keys' tiles. The bias stays: keys the mask hides before that index
// are hidden by it, so the result is exact for any mask, a suffix mask or not.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace loom::kernels {

// The built cuDNN attention graphs a thread keeps (Note [cuDNN attention plans]).
inline constexpr size_t kCudnnPlanCacheCapacity = 64;

enum class AttentionMaskKind : uint8_t {
  None,
  Bias,        // an additive mask of any broadcast shape
  KeyPadding,  // one row of S per batch entry: the bias and each entry's key count
};

// One call as cuDNN's graphs see it; every 4-D shape is (B, H, rows, cols), a 3-D (N, rows,
// cols) call is (N, 1, rows, cols).
struct AttentionSignature {
  using Strides = std::array<int64_t, 4>;
  int device = 0;
  DType dtype = kFloat32;
  bool heads = false;  // 4-D operands (their gradients then laid out as (B, rows, H, cols))
  int64_t B = 0, H = 0, L = 0, S = 0, E = 0, Ev = 0;
  Strides q{}, k{}, v{}, out{}, bias{};  // bias all 0 without a mask
  AttentionMaskKind mask = AttentionMaskKind::None;
  bool causal = false;
  double dropout_p = 0;
  bool deterministic = false;  // deterministic mode at the call: the backward's algorithm

  bool operator==(const AttentionSignature&) const = default;
};

struct AttentionSignatureHash {
  size_t operator()(const AttentionSignature& s) const;
};

// The signature of a call on q, k, v (all (N, rows, cols) contiguous or all (B, H, rows,
// cols) views) with an additive mask `bias` ((N, L, S) or (B, H, L, S) as the operands, any
// strides; undefined for none). `out` undefined: the layout fused_attention gives its
// output (attention_output_strides). `deterministic` is the mode as the call finds it
// (are_deterministic_algorithms_enabled()).
AttentionSignature attention_signature(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& bias, bool causal, double dropout_p);

// t's strides as (B, H, rows, cols): a 3-D (N, rows, cols) tensor is (N, 1, rows, cols),
// its size-1 head dim given the stride of a whole matrix.
AttentionSignature::Strides attention_strides(const Tensor& t);

// The strides, as (B, H, rows, cols), of the output or gradient fused attention makes for a
// (B, H, rows, ·) or (N, rows, ·) operand with `cols` columns: contiguous (N, rows, cols),
// or (B, rows, H, cols) seen as (B, H, rows, cols), MultiheadAttention's heads layout.
AttentionSignature::Strides attention_output_strides(const Tensor& like, int64_t cols);
// The same rule from the signature's view of the operands: `heads` for (B, H, rows, ·)
// operands, H heads (1 for (N, rows, ·) ones). The backward's gradients take it too.
AttentionSignature::Strides attention_output_strides(bool heads, int64_t H, int64_t rows, int64_t cols);

// How many cuDNN attention graphs this thread has built, forward or backward, refused ones
// included (kernels/cuda/cudnn_attention.cpp counts them): a steady-state training step
// adds none.
size_t cudnn_attention_graphs_built();
void count_cudnn_attention_graph_built();

// The cuDNN library and GPU a call would run on: cudnnGetVersion() (9.19.0 is 91900) and
// the compute capability (major * 10 + minor).
struct CudnnAttentionLimits {
  int64_t version = 0;
  int sm = 0;
};

// Why cuDNN's graphs would not take the call (the forward's, and the backward's too when
// needs_backward), by the rules known before a build; "" when none applies.
std::string refusal_by_cudnn_rules(const AttentionSignature& s, const CudnnAttentionLimits& limits,
                                   bool needs_backward);

}  // namespace loom::kernels
