// Recurrent layers recomputed in backward chunk by chunk (nn::RNNOptions::checkpoint_every).
//
// Note [chunked recurrent layers]
// A recurrent layer's backward needs, for every step, its gates and the states before it
// (the reserve: 4 to 7 (T, B, H) tensors per layer and direction), so a long sequence's
// memory is mostly reserve. With checkpoint_every(k) each layer and direction runs over
// time in chunks of k steps (the last one shorter when k does not divide T), and each chunk
// is one loom::checkpoint (Note [non-reentrant checkpoint]) of rnn_layer over the chunk's
// input slice, the state carried in (h, and c for LSTM) and the layer's weights: forward
// keeps only those inputs, the chunk boundaries' states and the outputs, and backward
// recomputes one chunk's reserve at a time (rnn_layer saves it as saved tensors so that the
// checkpoint's hooks see it). The reverse direction walks the chunks from the last to the
// first, carrying its state backwards. With lengths (packed semantics), a chunk starting
// at t0 gets the chunk-local lengths clamp(length - t0, 0, steps): a row with 0 there is
// skipped at every step, so its state passes through unchanged and its output is zero
// (Note [recurrent layer rules]): in forward a row that has ended, in reverse one that
// has not started. The recurrences and their order are the unchunked ones, so y, h_n, c_n
// and every gradient are the same to rounding: the input projections' GEMMs see k·B rows
// instead of T·B (the CPU's GEMM may round a row differently) and the weight gradients are
// summed chunk by chunk (tests/test_rnn_checkpoint.cpp says which float32 results are
// bit-identical; in float64 all agree to 1e-13). Dropout between layers stays outside the
// chunks (rnn_stack_by_layer draws it once per layer in forward), so the recomputation
// draws no masks. The stack always runs layer by layer here, also on a GPU whose plain
// path is cuDNN's whole-stack kernel (whose dropout masks are cuDNN's own).
#include "autograd/functions/rnn_chunked.h"

#include <algorithm>

#include "autograd/activation_checkpoint.h"
#include "autograd/function.h"
#include "core/ops.h"

namespace loom {
namespace {

const char* op_name(RNNMode mode) {
  return mode == RNNMode::LSTM ? "LSTM" : mode == RNNMode::GRU ? "GRU" : "RNN";
}

// The lengths within the chunk of `steps` steps from t0: clamp(length - t0, 0, steps), 0 for
// a row skipped throughout; computed where the lengths live (on a GPU, without a sync).
RNNLengths chunk_lengths(const RNNLengths& lengths, int64_t t0, int64_t steps) {
  if (lengths.device.defined()) return RNNLengths::on_device((lengths.device - t0).clamp(0, steps).contiguous());
  std::vector<int64_t> local;
  for (int64_t len : lengths.host) local.push_back(std::clamp<int64_t>(len - t0, 0, steps));
  return local;
}

// One layer and direction as rnn_layer's, in chunks of `every` steps.
// x (T, B, I); h0, c0 (B, H); y (T, B, H).
RNNLayerResult chunked_layer(int64_t every, RNNMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                             const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                             const RNNLengths& lengths, bool reverse) {
  const int64_t T = x.size(0), chunks = (T + every - 1) / every;
  std::vector<Tensor> ys(static_cast<size_t>(chunks));  // (steps, B, H) each, in time order
  Tensor h = h0, c = c0;  // (B, H): the state carried from chunk to chunk
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t chunk = reverse ? chunks - 1 - i : i;
    const int64_t t0 = chunk * every, steps = std::min(every, T - t0);
    RNNLengths local = chunk_lengths(lengths, t0, steps);
    const CheckpointFn run = [mode, local = std::move(local), reverse](const std::vector<Tensor>& in) {
      RNNLayerResult r = rnn_layer(mode, in[0], in[1], in[2], in[3], in[4], in[5], in[6], local, reverse);
      return std::vector<Tensor>{r.y, r.h_n, r.c_n};
    };
    const std::vector<Tensor> out = checkpoint(run, {x.narrow(0, t0, steps), h, c, w_ih, w_hh, b_ih, b_hh});
    ys[size_t(chunk)] = out[0];
    h = out[1];
    c = out[2];
  }
  return {cat(ys, 0), h, c};
}

}  // namespace

RNNStackResult rnn_stack_chunked(const RNNStackConfig& config, int64_t every, const Tensor& x, const Tensor& h0,
                                 const Tensor& c0, const std::vector<Tensor>& weights, const RNNLengths& lengths) {
  LOOM_CHECK(every >= 0, ValueError, op_name(config.mode), ": checkpoint_every must be >= 0 (0: off), got ", every,
             " for an input of shape ", shape_str(x.sizes()));
  std::vector<Tensor> inputs{x, h0, c0};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  // k >= T is one chunk: the plain path, as is a forward that keeps nothing for backward.
  if (every == 0 || every >= x.size(0) || !needs_grad_list(inputs)) return rnn_stack(config, x, h0, c0, weights, lengths);
  return rnn_stack_by_layer(config, x, h0, c0, weights, lengths,
                            [every](auto&&... args) { return chunked_layer(every, args...); });
}

}  // namespace loom
