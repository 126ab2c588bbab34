// nn::RNN, LSTM and GRU as ONNX's RNN, LSTM and GRU nodes, one per layer (each bidirectional
// where the module is), in seq-major layout.
//
// Note [onnx gate order]
// PyTorch (and Loom) stack an LSTM's gates as i, f, g, o and ONNX as i, o, f, c (c = g); a
// GRU's as r, z, n and ONNX's as z, r, h, where PyTorch's n = tanh(W_in x + b_in + r * (W_hn
// h + b_hn)) is ONNX's linear_before_reset = 1. ONNX's B is [Wb; Rb] per direction: b_ih then
// b_hh, each in ONNX's gate order.
#include "core/factories.h"
#include "core/ops.h"
#include "onnx/convert.h"

namespace loom::onnx {
namespace {

// w (G·H, ...) with its G gate blocks in the order `blocks` (ONNX's, Note [onnx gate order]).
Tensor reorder_gates(const Tensor& w, const std::vector<int64_t>& blocks, int64_t H) {
  std::vector<Tensor> parts;
  for (int64_t b : blocks) parts.push_back(w.slice(0, b * H, (b + 1) * H));
  return cat(parts, 0);
}

}  // namespace

void convert_rnn(GraphBuilder& g, const TracedOp& op) {
  const trace::OpRecord& r = op.record;
  const auto& m = *static_cast<const nn::RNNBaseImpl*>(r.module);
  const nn::RNNOptions& o = m.options;
  const std::string type = m.type_name();  // "RNN", "LSTM", "GRU"
  const bool lstm = type == "LSTM", gru = type == "GRU";
  const int64_t H = o.hidden_size_, L = o.num_layers_, D = o.bidirectional_ ? 2 : 1;
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 3, 1, 2}
                                     : gru ? std::vector<int64_t>{1, 0, 2}
                                           : std::vector<int64_t>{0};
  const int64_t G = int64_t(order.size());
  const std::string where = describe(op);
  const Tensor& input = r.inputs[0];
  const std::string prefix = g.fresh(type == "RNN" ? "rnn" : gru ? "gru" : "lstm");

  // x (T, B, I)
  std::string x = g.value(input, where);
  if (o.batch_first_) {
    const std::string t = g.fresh(prefix + "_x");
    attr(g.node("Transpose", {x}, {t}), "perm", std::vector<int64_t>{1, 0, 2});
    x = t;
  }
  std::string lens;
  if (r.inputs[3].defined()) {
    ::onnx::NodeProto& n = g.node("Cast", {g.value(r.inputs[3], where)}, {lens = g.fresh(prefix + "_lens")});
    attr(n, "to", int64_t(::onnx::TensorProto::INT32));
  }
  // This layer's rows [l·D, (l + 1)·D) of an initial state (L·D, B, H), or "" (zeros).
  auto state_rows = [&](const Tensor& s, int64_t l) -> std::string {
    if (!s.defined()) return "";
    return g.op("Slice", {g.value(s, where), g.ints({l * D}), g.ints({(l + 1) * D}), g.ints({0})});
  };

  const std::vector<Tensor> w = m.flat_weights();  // per layer and direction: w_ih, w_hh, b_ih, b_hh
  std::vector<std::string> h_n, c_n;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> W, R, B;
    for (int64_t d = 0; d < D; ++d) {
      const Tensor* p = &w[size_t(l * D + d) * 4];  // undefined biases where bias=false
      W.push_back(reorder_gates(p[0], order, H));  // (G·H, I)
      R.push_back(reorder_gates(p[1], order, H));  // (G·H, H)
      B.push_back(p[2].defined() ? cat({reorder_gates(p[2], order, H), reorder_gates(p[3], order, H)}, 0)
                       : zeros({2 * G * H}, p[0].options()));
    }
    const std::string name = prefix + "_l" + std::to_string(l);
    std::vector<std::string> ins{x, g.initializer(stack(W, 0), name + "_W"), g.initializer(stack(R, 0), name + "_R"),
                                 g.initializer(stack(B, 0), name + "_B"), lens, state_rows(r.inputs[1], l)};
    if (lstm) ins.push_back(state_rows(r.inputs[2], l));
    while (ins.back().empty()) ins.pop_back();  // optional inputs left out at the end
    const std::string y = g.fresh(name + "_Y"), yh = g.fresh(name + "_Y_h");
    std::vector<std::string> outs{y, yh};
    if (lstm) outs.push_back(g.fresh(name + "_Y_c"));
    ::onnx::NodeProto& n = g.node(type, ins, outs);
    attr(n, "hidden_size", H);
    if (D == 2) attr(n, "direction", std::string("bidirectional"));
    if (gru) attr(n, "linear_before_reset", int64_t(1));
    if (type == "RNN") {
      const std::string act = o.nonlinearity_ == "relu" ? "Relu" : "Tanh";
      attr(n, "activations", std::vector<std::string>(size_t(D), act));
    }
    h_n.push_back(yh);
    if (lstm) c_n.push_back(outs[2]);
    // Y (T, D, B, H) -> (T, B, D·H): the next layer's input
    const std::string t = g.fresh(name + "_Yt");
    attr(g.node("Transpose", {y}, {t}), "perm", std::vector<int64_t>{0, 2, 1, 3});
    x = g.op("Reshape", {t, g.ints({0, 0, -1})});
  }
  auto join = [&](const std::vector<std::string>& parts, const Tensor& out) {
    ::onnx::NodeProto& n = g.node("Concat", parts, {g.fresh(prefix + "_state")});
    attr(n, "axis", int64_t(0));
    g.bind(out, n.output(0));
  };
  if (o.batch_first_) {
    const std::string y = g.fresh(prefix + "_output");
    attr(g.node("Transpose", {x}, {y}), "perm", std::vector<int64_t>{1, 0, 2});
    g.bind(r.outputs[0], y);
  } else {
    g.bind(r.outputs[0], x);
  }
  join(h_n, r.outputs[1]);
  if (lstm) join(c_n, r.outputs[2]);
}

}  // namespace loom::onnx
