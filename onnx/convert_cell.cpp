// nn::RNNCell, LSTMCell and GRUCell decomposed into Gemm, Add, Sigmoid, Tanh (as
// torch.onnx.export writes them), in PyTorch's gate layout: the weights' rows stay as they
// are (LSTM i, f, g, o; GRU r, z, n), each gate a Slice of the projections (torch's Split).
// A missing state is zeros: its terms are left out.
#include "core/ops.h"
#include "onnx/convert.h"

namespace loom::onnx {
namespace {

struct Cell {
  GraphBuilder& g;
  int64_t H;
  std::string where;  // for messages
  // Columns [k·H, (k + 1)·H) of v (B, G·H): gate k.
  std::string gate(const std::string& v, int64_t k) {
    return g.op("Slice", {v, g.ints({k * H}), g.ints({(k + 1) * H}), g.ints({-1})});  // b_hh alone is 1-D
  }
  // Gemm: x (B, K) · W (G·H, K)^T + b, the weight as it is (transB); "" where x is "".
  std::string project(const std::string& x, const Tensor& w, const Tensor& b) {
    if (x.empty()) return b.defined() ? g.value(b, where) : "";
    std::vector<std::string> ins{x, g.value(w, where)};
    if (b.defined()) ins.push_back(g.value(b, where));
    ::onnx::NodeProto& n = g.node("Gemm", ins, {g.fresh("gates")});
    attr(n, "transB", int64_t(1));
    return n.output(0);
  }
  std::string add(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    return g.op("Add", {a, b});
  }
};

}  // namespace

void convert_rnn_cell(GraphBuilder& g, const TracedOp& op) {
  const trace::OpRecord& r = op.record;
  const auto& m = *static_cast<const nn::RNNCellBaseImpl*>(r.module);
  const std::string where = describe(op);
  Cell c{g, m.hidden_size, where};
  const std::string x = g.value(r.inputs[0], where);
  const std::string h = g.value(r.inputs[1], where), cell = g.value(r.inputs[2], where);  // "" where zeros
  const std::string gx = c.project(x, m.weight_ih, m.bias_ih);  // (B, G·H)
  const std::string gh = c.project(h, m.weight_hh, m.bias_hh);  // (B, G·H), or b_hh, or ""
  const auto mode = RNNMode(r.ints[0]);  // recorded by the cell
  switch (mode) {
    case RNNMode::RNN_TANH:
    case RNNMode::RNN_RELU:
      g.bind(r.outputs[0], g.op(mode == RNNMode::RNN_RELU ? "Relu" : "Tanh", {c.add(gx, gh)}));
      return;
    case RNNMode::LSTM: {  // gates i, f, g, o
      const std::string gates = c.add(gx, gh);
      const std::string i = g.op("Sigmoid", {c.gate(gates, 0)}), f = g.op("Sigmoid", {c.gate(gates, 1)});
      const std::string n = g.op("Tanh", {c.gate(gates, 2)}), o = g.op("Sigmoid", {c.gate(gates, 3)});
      const std::string in = g.op("Mul", {i, n});
      const std::string c1 = cell.empty() ? in : g.op("Add", {g.op("Mul", {f, cell}), in});  // c' = f c + i g
      g.bind(r.outputs[0], g.op("Mul", {o, g.op("Tanh", {c1})}));                           // h' = o tanh(c')
      g.bind(r.outputs[1], c1);
      return;
    }
    case RNNMode::GRU: {  // r, z, n; n = tanh(x W_in + b_in + r (h W_hn + b_hn))
      auto part = [&](const std::string& v, int64_t k) { return v.empty() ? "" : c.gate(v, k); };
      const std::string rg = g.op("Sigmoid", {c.add(c.gate(gx, 0), part(gh, 0))});
      const std::string z = g.op("Sigmoid", {c.add(c.gate(gx, 1), part(gh, 1))});
      const std::string hn = part(gh, 2);
      const std::string n = g.op("Tanh", {c.add(c.gate(gx, 2), hn.empty() ? "" : g.op("Mul", {rg, hn}))});
      // h' = (1 - z) n + z h
      const std::string keep = g.op("Mul", {g.op("Sub", {g.scalar(1, r.inputs[0].dtype()), z}), n});
      g.bind(r.outputs[0], h.empty() ? keep : g.op("Add", {keep, g.op("Mul", {z, h})}));
      return;
    }
  }
}

}  // namespace loom::onnx
