// The compute layer: functions that fill output tensors from input tensors, with no
// autograd. Each entry point is defined once, in kernels/router.cpp: it checks that the
// operands share a device and calls that device's backend (Note [kernel routing] in
// kernels/backend.h): the CPU implementation (kernels/cpu/) or the CUDA one (kernels/cuda/,
// when built with CUDA).
//
// Conventions, shared by every kernel:
// - Outputs are allocated by the caller (autograd/functions/) with the right shape and
//   dtype; kernels write every element of them and may assume they do not overlap inputs
//   unless stated ("may alias").
// - Inputs of elementwise kernels already have the output's shape (broadcast dims have
//   stride 0) and the compute dtype; arbitrary strides are allowed everywhere.
// - Dims are already wrapped to [0, ndim).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "kernels/math/elementwise_ops.h"
#include "kernels/math/optim_math.h"

namespace loom::kernels {

// UnaryOp, BinaryOp and ReduceOp, and a table row of facts per op (name, backward node,
// dtypes, ...): kernels/math/elementwise_ops.h, Note [op tables].

// out = op(in). out and in have the same shape and dtype, except the ops whose row says
// AllToBool (logical_not, isfinite, isnan, isinf: bool out).
// May alias (out == in for in-place).
void unary(UnaryOp op, const Tensor& out, const Tensor& in, double arg0 = 0, double arg1 = 0, double arg2 = 0);
// out = op(a, b). a and b have out's shape and one dtype; out has it too (bool for
// comparisons). May alias a (in-place forms).
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1);
// out = cond ? a : b; cond is bool; a, b, out one dtype, all of out's shape.
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// dst = src, converting dtype; src has dst's shape (may be broadcast). Same device.
void copy(const Tensor& dst, const Tensor& src);
// Copy between devices (the shapes equal, both contiguous, one dtype).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);
void fill(const Tensor& dst, Scalar value);

// Random fills. Element i uses words 2i and 2i+1 of the Philox stream starting at block
// `offset` (kernels/math/random_math.h); the caller reserves the counters.
void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset);
void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset);
// dst[i] = uniform_i < p[i] ? 1 : 0; p has dst's shape.
void bernoulli(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset);
// The same with one probability for every element: equal, element for element, to the
// tensor version with p[i] == p. p is checked on the host, so the CUDA version never
// waits for the GPU (dropout calls it on every step).
void bernoulli(const Tensor& dst, double p, uint64_t seed, uint64_t offset);
void randint(const Tensor& dst, int64_t low, int64_t high, uint64_t seed, uint64_t offset);
// out (rows, num_samples) int64 = category draws from each row of the non-negative
// weights probs (rows, categories), both contiguous, probs floating. ValueError naming the
// row for a negative, inf or NaN weight, a row summing to 0, or (without replacement)
// fewer non-zero weights than samples. Draws and their Philox counters:
// kernels/math/multinomial_math.h (Note [multinomial draws]); the caller reserves them.
void multinomial(const Tensor& out, const Tensor& probs, bool replacement, uint64_t seed, uint64_t offset);

// out has in's shape with `dims` removed (keepdim is the caller's view business).
// Sum/Mean/Prod accumulate in opmath (float for 16-bit floats). Empty dims is not allowed.
void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const Dims& dims);
// Values and int64 indices of the max (or min) along dim; out shapes = in without dim.
// Ties give the first index; NaN propagates (a NaN wins).
void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in,
                int64_t dim);
// Sum of (x - mean)^2 along dims, divided by (count - correction). out as in reduce.
void variance(const Tensor& out, const Tensor& in, const Dims& dims, int64_t correction);
void cumsum(const Tensor& out, const Tensor& in, int64_t dim);
// The first k = values.size(1) elements of each row of in (rows, n) in sorted order
// (Note [sort order] in kernels/math/sort_math.h: stable, NaN largest), with their int64
// positions in the row: sort is k = n, topk any k <= n. Unlike the other kernels this one
// takes contiguous rows (the caller moves the sorted dim last); values (rows, k) has in's
// dtype, indices (rows, k) is int64, both contiguous.
void sort(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending);

// Softmax or log-softmax along dim; out has in's shape.
void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log);
// grad_in from grad_out and the forward output y:
//   softmax:     gx = y * (g - sum(g * y))      log_softmax: gx = g - exp(y) * sum(g)
void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& y,
                      int64_t dim, bool log);

// Batched GEMM: out (B, M, N) = a (B, M, K) @ b (B, K, N), any strides, one float dtype.
// beta = 0 overwrites out; beta = 1 accumulates.
void bmm(const Tensor& out, const Tensor& a, const Tensor& b, double beta = 0);

// out = in.index_select(dim, index): out.size(dim) = index.numel().
void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
// out.index_add_(dim, index, src): out[..., index[i], ...] += src[..., i, ...].
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// out[i][j][k] = in[i][index[i][j][k]][k] (dim = 1); out has index's shape.
void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
// out[i][index[i][j][k]][k] += src[i][j][k] (dim = 1), over index's shape.
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// Keeps elements with col - row <= k (lower) or >= k (upper) of the last two dims.
void triangle(const Tensor& out, const Tensor& in, int64_t k, bool lower);

// ---- recurrent layers (Note [whole-sequence RNN kernels] in kernels/cpu/rnn.cpp) ----------

enum class RNNMode { RNN_TANH, RNN_RELU, LSTM, GRU };
constexpr int64_t rnn_gates(RNNMode m) { return m == RNNMode::LSTM ? 4 : m == RNNMode::GRU ? 3 : 1; }

// One layer, one direction, over a whole time-major sequence.
struct RNNLayerInput {
  RNNMode mode;
  Tensor x;               // (T, B, I)
  Tensor h0;              // (B, H)
  Tensor c0;              // (B, H), LSTM only
  Tensor w_ih, w_hh;      // (G*H, I), (G*H, H)
  Tensor b_ih, b_hh;      // (G*H) each, or both undefined
  std::vector<int64_t> lengths;  // per batch row, or empty for all T; sorted or not
  bool reverse = false;   // process t = T-1 .. 0
  // Or the lengths on x's device, int64 (B) contiguous, which the host never reads: a GPU
  // step whose inputs all live there (a CUDA graph's). At most one of the two is given.
  Tensor device_lengths;
};

// What forward keeps for backward (indexed by time t).
struct RNNReserve {
  Tensor h_prev;   // (T, B, H) state before step t
  Tensor c_prev;   // (T, B, H) LSTM
  Tensor tanh_c;   // (T, B, H) LSTM: tanh of the cell state after step t
  Tensor gates;    // (T, B, G*H) activations (LSTM i f g o; GRU r z n)
  Tensor gh_n;     // (T, B, H) GRU: W_hn h + b_hn
};

struct RNNLayerOutput {
  Tensor y;    // (T, B, H); zero past each row's length
  Tensor h_n;  // (B, H) state after each row's last valid step
  Tensor c_n;  // (B, H) LSTM
  RNNReserve reserve;
};

struct RNNLayerGrads {
  Tensor dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh;
};

RNNLayerOutput rnn_layer_forward(const RNNLayerInput& in);
// dy (T, B, H), dh_n, dc_n (B, H) may be undefined (zero).
RNNLayerGrads rnn_layer_backward(const RNNLayerInput& in, const RNNReserve& reserve, const Tensor& dy,
                                 const Tensor& dh_n, const Tensor& dc_n);

// A whole stack of layers and directions in one call, on devices that have such a kernel
// (cuDNN on a GPU: kernels/cuda/cudnn_rnn.cpp). rnn_stack_supported(x) says whether x's
// device runs x's dtype and shape that way; the other entry points need it to be true.
struct RNNStackConfig {
  RNNMode mode;
  int64_t input_size, hidden_size, num_layers;
  bool bidirectional = false;
  double dropout = 0.0;    // between layers (the backend's own generator); 0 in eval mode
  bool training = false;   // forward for backward: keeps what backward needs
};

// What forward keeps for backward: the backend's own type (descriptors, packed weights, ...).
struct RNNStackSaved {
  virtual ~RNNStackSaved() = default;
};

struct RNNStackOutput {
  Tensor y;   // (T, B, D·H), zero past each length
  Tensor hy;  // (L·D, B, H)
  Tensor cy;  // (L·D, B, H), LSTM only
  std::shared_ptr<RNNStackSaved> saved;  // training only
};

struct RNNStackGrads {
  Tensor dx, dhx, dcx;
  std::vector<Tensor> dweights;  // one per weight given to forward (undefined for undefined ones)
};

bool rnn_stack_supported(const Tensor& x);
// x (T, B, I) contiguous; hx, cx (L·D, B, H); weights: PyTorch's flat list, per layer and
// direction w_ih, w_hh, b_ih, b_hh (the biases undefined without bias); lengths per batch
// row in [1, T], or empty. All on one device, one dtype.
RNNStackOutput rnn_stack_forward(const RNNStackConfig& config, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const std::vector<Tensor>& weights, const std::vector<int64_t>& lengths);
// dy (T, B, D·H), dhy, dcy (L·D, B, H), each possibly undefined (zero). x, hx, cx and y
// are forward's.
RNNStackGrads rnn_stack_backward(const RNNStackSaved& saved, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                 const Tensor& y, const Tensor& dy, const Tensor& dhy, const Tensor& dcy);

// ---- optimizer updates (the per-element math: kernels/math/optim_math.h) ------------------------

// The parameters one fused update covers: each p with its gradient and its K state tensors
// (an undefined state is a buffer the options switch off: a scratch value starting at 0,
// dropped). All on one device and of one dtype; gradients and defined states contiguous, of
// their parameter's size (checked).
template <size_t K>
struct ParamList {
  std::vector<Tensor> params, grads;
  std::vector<std::array<Tensor, K>> states;
};

// Where an update's learning rate and step counts come from (Note [capturable optimizers]
// in optim/optimizer.h):
// - eager (device_lr undefined): lr and steps[i], each parameter's count of updates with
//   this one, on the host, which computes each parameter's math (update_math);
// - capturable: device_lr, a () float64 tensor, and device_steps[i], one () float64 per
//   parameter (or none, for an optimizer that counts no steps), on the parameters' device,
//   read where the update runs. The counts are advanced there by one first. If found_inf
//   ((1,) float32, GradScaler's) is given and nonzero, nothing changes: no update, no
//   advance.
struct UpdateScalars {
  double lr = 0;
  std::vector<double> steps;
  Tensor device_lr;
  std::vector<Tensor> device_steps;
  Tensor found_inf;
};

// One fused update of every parameter of `list` (Note [fused optimizer updates] in
// kernels/cuda/optim_update.cu: one launch for the list on a GPU); `op` names the optimizer
// in errors. The caller bumps the parameters' versions.
void sgd_update(const char* op, const ParamList<1>& list, const SgdHyper& hyper, const UpdateScalars& scalars);
void adam_update(const char* op, const ParamList<3>& list, const AdamHyper& hyper, const UpdateScalars& scalars);
void rmsprop_update(const char* op, const ParamList<3>& list, const RmspropHyper& hyper,
                    const UpdateScalars& scalars);

// ---- mixed precision: the gradient scaler's kernels (kernels/math/amp_math.h) -------------------

// g *= inv_scale[0], in place, for every g of grads, and found_inf[0] = 1 if any element of
// any was inf or NaN (left as it was otherwise): on a GPU one launch per dtype. The grads
// are contiguous and floating point; found_inf and inv_scale are (1,) float32 on their
// device (checked).
void unscale_grads(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale);
// One update of scale ((1,) float32) and growth_tracker ((1,) int32) from found_inf, in
// place on their device (update_scale_math): on CUDA without a wait for the GPU.
void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  double growth_factor, double backoff_factor, int64_t growth_interval);

// ---- the joint norm of a list of tensors (kernels/math/norm_math.h) -----------------------------

// out[()] = (sum over every element x of every tensor of |x|^p)^(1/p), or max |x| for
// p = inf (NaN if any x is NaN), in one pass without temporaries: on a GPU two launches
// (per dtype, Note [multi-tensor launches]) and nothing read back. The terms are summed in
// the elements' opmath type in short runs and those in double, in an order fixed by the
// data alone (Note [fixed-order norm]): the same bits at any thread count. The tensors are
// contiguous, floating point and on out's device; out is a () float64 tensor; p > 0
// (checked). clip_grad_norm_'s total norm.
void multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out);

// IndexError naming `op` and the first index outside [0, size) (negatives included), if
// any. On the CPU it is thrown here; on a GPU the check is queued and a failure is thrown by
// the next call that waits for the device (Note [deferred device checks] in
// kernels/support/device_check.h).
void check_indices(const Tensor& index, int64_t size, const char* op);
// The same for the class targets of a loss (ignored rows already mapped into range): "op:
// target class V is out of range for C classes of <context>". The CPU names the smallest
// target if one is negative and the largest otherwise; a GPU names the first bad one.
void check_class_targets(const Tensor& target, int64_t classes, const char* op, const std::string& context);
// The same for the lengths (B) of a batch of sequences of T steps, each in [1, T]: a
// ValueError "op: length V of sequence b is outside [1, T] for <context>".
void check_sequence_lengths(const Tensor& lengths, int64_t T, const char* op, const std::string& context);

}  // namespace loom::kernels
