// The ops of Loom's tensor API and functional layers as ONNX nodes (opset 17 unless said).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/functions/op_tables.h"
#include "core/factories.h"
#include "onnx/convert.h"

namespace loom::onnx {
namespace {

struct Ctx {
  GraphBuilder& g;
  const TracedOp& op;
  const trace::OpRecord& r;
  std::string in(size_t i) const { return g.value(r.inputs[i], describe(op)); }
  const Tensor& out(size_t i = 0) const { return r.outputs[i]; }
  // Size argument i of the record's ints (floats): a constant, or what follows a dynamic axis.
  SymSize size(size_t i) const {
    auto it = op.int_sizes.find(i);
    return it != op.int_sizes.end() ? it->second : SymSize::constant(r.ints[i]);
  }
  SymSize float_size(size_t i) const {
    auto it = op.float_sizes.find(i);
    return it != op.float_sizes.end() ? it->second : SymSize::constant(int64_t(r.floats[i]));
  }
  std::vector<SymSize> sizes() const {  // every int, as sizes (a reshape's, an expand's)
    std::vector<SymSize> v;
    for (size_t i = 0; i < r.ints.size(); ++i) v.push_back(size(i));
    return v;
  }
  // Binds the op's output i to a new value made by `op_type`, and returns the node.
  ::onnx::NodeProto& emit(const std::string& op_type, const std::vector<std::string>& inputs, size_t i = 0) {
    const std::string name = g.fresh(op_type);
    g.bind(r.outputs[i], name);
    return g.node(op_type, inputs, {name});
  }
  // `v` (a value of input i's dtype) cast to `to`, where they differ.
  std::string cast(const std::string& v, DType from, DType to) {
    if (g.export_dtype(from) == g.export_dtype(to)) return v;
    ::onnx::NodeProto& n = g.node("Cast", {v}, {g.fresh("cast")});
    attr(n, "to", int64_t(g.elem_type(to)));
    return n.output(0);
  }
};

[[noreturn]] void unsupported(const TracedOp& op, const std::string& why) {
  throw NotImplementedError(
      ::loom::detail::str("onnx export: ", describe(op), " has no ONNX form", why.empty() ? "" : ": ", why));
}

void binary(Ctx& c) {
  const auto op = BinaryOp(c.r.ints[0]);
  const DType ct = DType(c.r.ints[1]);
  std::string a = c.cast(c.in(0), c.r.inputs[0].dtype(), ct), b = c.cast(c.in(1), c.r.inputs[1].dtype(), ct);
  const double alpha = c.r.floats[0];
  if ((op == BinaryOp::Add || op == BinaryOp::Sub) && alpha != 1) b = c.g.op("Mul", {b, c.g.scalar(alpha, ct)});
  static const std::map<BinaryOp, const char*> kTypes{
      {BinaryOp::Add, "Add"},         {BinaryOp::Sub, "Sub"},         {BinaryOp::Mul, "Mul"},
      {BinaryOp::Div, "Div"},         {BinaryOp::Pow, "Pow"},         {BinaryOp::Maximum, "Max"},
      {BinaryOp::Minimum, "Min"},     {BinaryOp::Eq, "Equal"},        {BinaryOp::Lt, "Less"},
      {BinaryOp::Le, "LessOrEqual"},  {BinaryOp::Gt, "Greater"},      {BinaryOp::Ge, "GreaterOrEqual"}};
  if (op == BinaryOp::Ne) {
    c.emit("Not", {c.g.op("Equal", {a, b})});
    return;
  }
  auto it = kTypes.find(op);
  if (it == kTypes.end()) unsupported(c.op, "");
  if (op == BinaryOp::Div && !is_floating_point(ct)) unsupported(c.op, "integer division");
  c.emit(it->second, {a, b});
}

void unary(Ctx& c) {
  const auto op = UnaryOp(c.r.ints[0]);
  const DType dt = c.out().dtype();
  const bool to_bool = dt == kBool && op != UnaryOp::LogicalNot;
  const std::string x = to_bool ? c.in(0) : c.cast(c.in(0), c.r.inputs[0].dtype(), dt);
  const double a0 = c.r.floats[0], a1 = c.r.floats[1];
  auto k = [&](double v) { return c.g.scalar(v, dt); };
  static const std::map<UnaryOp, const char*> kSame{
      {UnaryOp::Neg, "Neg"},   {UnaryOp::Abs, "Abs"},   {UnaryOp::Exp, "Exp"},         {UnaryOp::Log, "Log"},
      {UnaryOp::Sqrt, "Sqrt"}, {UnaryOp::Sin, "Sin"},   {UnaryOp::Cos, "Cos"},         {UnaryOp::Tanh, "Tanh"},
      {UnaryOp::Relu, "Relu"}, {UnaryOp::Sign, "Sign"}, {UnaryOp::Sigmoid, "Sigmoid"}, {UnaryOp::LogicalNot, "Not"},
      {UnaryOp::IsNan, "IsNaN"}, {UnaryOp::IsInf, "IsInf"}};
  if (auto it = kSame.find(op); it != kSame.end()) {
    c.emit(it->second, {x});
    return;
  }
  switch (op) {
    case UnaryOp::Log1p: c.emit("Log", {c.g.op("Add", {x, k(1)})}); return;
    case UnaryOp::Rsqrt: c.emit("Reciprocal", {c.g.op("Sqrt", {x})}); return;
    case UnaryOp::Silu: c.emit("Mul", {x, c.g.op("Sigmoid", {x})}); return;
    case UnaryOp::Gelu:  // 0.5 x (1 + erf(x / sqrt 2)); opset 20's Gelu is the same
      c.emit("Mul", {c.g.op("Mul", {x, k(0.5)}),
                     c.g.op("Add", {k(1), c.g.op("Erf", {c.g.op("Mul", {x, k(M_SQRT1_2)})})})});
      return;
    case UnaryOp::GeluTanh: {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const std::string cube = c.g.op("Mul", {c.g.op("Mul", {x, x}), x});
      const std::string inner = c.g.op("Mul", {k(std::sqrt(2 / M_PI)), c.g.op("Add", {x, c.g.op("Mul", {cube, k(0.044715)})})});
      c.emit("Mul", {c.g.op("Mul", {x, k(0.5)}), c.g.op("Add", {k(1), c.g.op("Tanh", {inner})})});
      return;
    }
    case UnaryOp::Clamp: c.emit("Min", {c.g.op("Max", {x, k(a0)}), k(a1)}); return;
    case UnaryOp::PowScalar: c.emit("Pow", {x, k(a0)}); return;
    case UnaryOp::AddScalar: c.emit("Add", {x, k(a0)}); return;
    case UnaryOp::MulScalar: c.emit("Mul", {x, k(a0)}); return;
    default: unsupported(c.op, "");
  }
}

// sum / mean: ints = keepdim, then the dims (none: all).
void reduce(Ctx& c, bool mean) {
  const bool keepdim = c.r.ints[0] != 0;
  const std::vector<int64_t> dims(c.r.ints.begin() + 1, c.r.ints.end());
  std::string x = c.cast(c.in(0), c.r.inputs[0].dtype(), c.out().dtype());  // ints sum in int64
  if (dims.empty() && c.r.inputs[0].dim() > 0) {  // sum() of everything: a 0-D result
    ::onnx::NodeProto& n = c.emit(mean ? "ReduceMean" : "ReduceSum", {x});
    attr(n, "keepdims", int64_t(0));
    return;
  }
  if (dims.empty()) {
    c.emit("Identity", {x});
    return;
  }
  if (mean && c.g.opset() < 18) {  // ReduceMean takes its axes as an attribute before opset 18
    ::onnx::NodeProto& n = c.emit("ReduceMean", {x});
    attr(n, "axes", dims), attr(n, "keepdims", int64_t(keepdim));
    return;
  }
  ::onnx::NodeProto& n = c.emit(mean ? "ReduceMean" : "ReduceSum", {x, c.g.ints(dims)});
  attr(n, "keepdims", int64_t(keepdim));
}

void linear(Ctx& c) {
  const Tensor& x = c.r.inputs[0];
  const Tensor &w = c.r.inputs[1], &b = c.r.inputs[2];
  if (x.dim() == 2) {  // Gemm: x (B, K) · W (N, K)^T + b (N)
    std::vector<std::string> ins{c.in(0), c.in(1)};
    if (b.defined()) ins.push_back(c.in(2));
    ::onnx::NodeProto& n = c.emit("Gemm", ins);
    attr(n, "transB", int64_t(1));
    return;
  }
  // MatMul with W^T (K, N) folded into a constant, then Add.
  const std::string wt = c.g.initializer(w.t(), c.g.constant_name(w) + "_t");
  if (!b.defined()) {
    c.emit("MatMul", {c.in(0), wt});
    return;
  }
  c.emit("Add", {c.g.op("MatMul", {c.in(0), wt}), c.in(2)});
}

void layer_norm(Ctx& c) {
  const int64_t k = c.r.ints[0];
  const Tensor& x = c.r.inputs[0];
  Shape normalized(x.sizes().end() - k, x.sizes().end());
  const std::string scale = c.r.inputs[1].defined() ? c.in(1) : c.g.initializer(ones(normalized, x.options()), "ones");
  std::vector<std::string> ins{c.in(0), scale};
  if (c.r.inputs[2].defined()) ins.push_back(c.in(2));
  ::onnx::NodeProto& n = c.emit("LayerNormalization", ins);
  attr(n, "axis", -k), attr(n, "epsilon", float(c.r.floats[0]));
}

void select(Ctx& c) {  // ints: dim, index, the dim's size
  const int64_t d = c.r.ints[0];
  const SymSize index = c.size(1), n = c.size(2);
  std::string i;
  if (index.is_constant()) {
    i = c.g.initializer(scalar_tensor(index.offset, kInt64), "index");
  } else if (index.symbols == n.symbols && index.scale == n.scale && index.offset < n.offset) {
    // n - k (x[:, T - 1]) is -k at any n
    i = c.g.initializer(scalar_tensor(index.offset - n.offset, kInt64), "index");
  } else {  // computed, as a 0-D index
    i = c.g.op("Squeeze", {c.g.dim(index), c.g.ints({0})});
  }
  attr(c.emit("Gather", {c.in(0), i}), "axis", d);
}

void slice(Ctx& c) {  // ints: dim, start, end, step, the dim's size; a bound may follow an axis
  const int64_t d = c.r.ints[0], step = c.r.ints[3];
  c.emit("Slice", {c.in(0), c.g.dim(c.size(1)), c.g.dim(c.size(2)), c.g.ints({d}), c.g.ints({step})});
}

void flatten(Ctx& c) {  // (d0.. ds-1, prod, de+1..) from the input's own shape
  const int64_t s = c.r.ints[0], e = c.r.ints[1], rank = c.r.inputs[0].dim();
  const std::string sh = c.g.op("Shape", {c.in(0)});
  std::vector<std::string> parts;
  auto part = [&](int64_t from, int64_t to) {
    ::onnx::NodeProto& n = c.g.node("Shape", {c.in(0)}, {c.g.fresh("dims")});
    attr(n, "start", from), attr(n, "end", to);
    parts.push_back(n.output(0));
  };
  if (s > 0) part(0, s);
  parts.push_back(c.g.ints({-1}));
  if (e + 1 < rank) part(e + 1, rank);
  ::onnx::NodeProto& cat = c.g.node("Concat", parts, {c.g.fresh("shape")});
  attr(cat, "axis", int64_t(0));
  c.emit("Reshape", {c.in(0), cat.output(0)});
}

// full/zeros/ones: ConstantOfShape where a size follows a dynamic axis, else a constant (left
// to GraphBuilder::value, which folds it).
void full(Ctx& c) {
  const std::vector<SymSize> sizes = c.sizes();
  if (std::all_of(sizes.begin(), sizes.end(), [](const SymSize& s) { return s.is_constant(); })) return;
  ::onnx::NodeProto& n = c.emit("ConstantOfShape", {c.g.shape(sizes)});
  ::onnx::AttributeProto* a = n.add_attribute();
  a->set_name("value"), a->set_type(::onnx::AttributeProto::TENSOR);
  const Tensor one = full({1}, c.r.floats[0], TensorOptions(c.g.export_dtype(c.out().dtype())));
  a->mutable_t()->set_data_type(c.g.elem_type(one.dtype()));
  a->mutable_t()->add_dims(1);
  a->mutable_t()->set_raw_data(one.data(), size_t(element_size(one.dtype())));
}

// arange(start, end, step): Range where start or end follows a dynamic axis, else a constant.
void arange(Ctx& c) {
  const SymSize start = c.float_size(0), end = c.float_size(1);
  if (start.is_constant() && end.is_constant()) return;
  const DType dt = c.out().dtype();
  auto bound = [&](const SymSize& s, double v) {  // a 0-D value of dt
    if (s.is_constant()) return c.g.scalar(v, dt);
    return c.cast(c.g.op("Squeeze", {c.g.dim(s), c.g.ints({0})}), kInt64, dt);
  };
  c.emit("Range", {bound(start, c.r.floats[0]), bound(end, c.r.floats[1]), c.g.scalar(c.r.floats[2], dt)});
}

void where(Ctx& c) {
  const DType ct = DType(c.r.ints[0]);
  c.emit("Where", {c.in(0), c.cast(c.in(1), c.r.inputs[1].dtype(), ct), c.cast(c.in(2), c.r.inputs[2].dtype(), ct)});
}

// scaled_dot_product_attention from opset 23: one Attention node, for (B, H, L, E) heads (as
// MultiheadAttention passes them) or (N, L, E) as one head.
void attention_node(Ctx& c, bool causal, double scale) {
  std::vector<std::string> ins{c.in(0), c.in(1), c.in(2)};
  const Tensor& mask = c.r.inputs[3];
  if (mask.defined()) {  // bool: true takes part; float: added
    // ONNX Runtime wants the mask's query dim at its size: broadcast (..., 1, S) to (..., L, S).
    const int64_t rank = mask.dim(), q_rank = c.r.inputs[0].dim();
    ::onnx::NodeProto& l = c.g.node("Shape", {c.in(0)}, {c.g.fresh("query_length")});
    attr(l, "start", q_rank - 2), attr(l, "end", q_rank - 1);
    std::vector<std::string> parts;
    if (rank > 2) parts.push_back(c.g.ints(std::vector<int64_t>(size_t(rank - 2), 1)));
    parts.push_back(l.output(0));
    parts.push_back(c.g.ints({1}));
    ::onnx::NodeProto& shape = c.g.node("Concat", parts, {c.g.fresh("mask_shape")});
    attr(shape, "axis", int64_t(0));
    ins.push_back(c.g.op("Expand", {c.in(3), shape.output(0)}));
  }
  ::onnx::NodeProto& n = c.emit("Attention", ins);
  attr(n, "is_causal", int64_t(causal)), attr(n, "scale", float(scale));
  if (c.r.inputs[0].dim() == 3) attr(n, "q_num_heads", int64_t(1)), attr(n, "kv_num_heads", int64_t(1));
}

// scaled_dot_product_attention: Attention from opset 23, else decomposed: softmax(scale q k^T
// + mask) v, the mask additive (a bool one: true takes part), causal keeping keys j <= i.
void sdpa(Ctx& c) {
  const Tensor &q = c.r.inputs[0], &mask = c.r.inputs[3];
  const bool causal = c.r.ints[0] != 0;
  const double scale = std::isnan(c.r.floats[0]) ? 1.0 / std::sqrt(double(q.size(-1))) : c.r.floats[0];
  const DType dt = q.dtype();
  const int64_t rank = q.dim();
  if (c.g.opset() >= 23 && (rank == 3 || rank == 4) && (!mask.defined() || mask.dim() <= rank))
    return attention_node(c, causal, scale);
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t(rank - 1)], perm[size_t(rank - 2)]);
  ::onnx::NodeProto& kt = c.g.node("Transpose", {c.in(1)}, {c.g.fresh("keys_t")});
  attr(kt, "perm", perm);
  std::string scores = c.g.op("MatMul", {c.g.op("Mul", {c.in(0), c.g.scalar(scale, dt)}), kt.output(0)});  // (..., L, S)
  std::string neg_inf, zero;  // made once, where a mask needs them
  auto additive = [&](const std::string& keep) {  // bool -> 0 where kept, -inf elsewhere
    if (zero.empty()) zero = c.g.scalar(0, dt), neg_inf = c.g.scalar(-std::numeric_limits<double>::infinity(), dt);
    return c.g.op("Where", {keep, zero, neg_inf});
  };
  if (mask.defined()) {
    const std::string m = mask.dtype() == kBool ? additive(c.in(3)) : c.in(3);
    scores = c.g.op("Add", {scores, m});
  }
  if (causal) {  // ones (L, S) kept on and below the diagonal
    const std::string ls = c.g.op("Shape", {scores});
    ::onnx::NodeProto& last2 = c.g.node("Slice", {ls, c.g.ints({-2}), c.g.ints({std::numeric_limits<int64_t>::max()})},
                                        {c.g.fresh("ls")});
    ::onnx::NodeProto& ones = c.g.node("ConstantOfShape", {last2.output(0)}, {c.g.fresh("ones")});
    ::onnx::AttributeProto* a = ones.add_attribute();
    a->set_name("value"), a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(::onnx::TensorProto::BOOL), a->mutable_t()->add_dims(1);
    a->mutable_t()->set_raw_data(std::string(1, '\1'));
    ::onnx::NodeProto& keep = c.g.node("Trilu", {ones.output(0)}, {c.g.fresh("keep")});
    attr(keep, "upper", int64_t(0));
    scores = c.g.op("Add", {scores, additive(keep.output(0))});
  }
  ::onnx::NodeProto& softmax = c.g.node("Softmax", {scores}, {c.g.fresh("weights")});
  attr(softmax, "axis", int64_t(-1));
  c.emit("MatMul", {softmax.output(0), c.in(2)});
}

}  // namespace

void convert_op(GraphBuilder& g, const TracedOp& op) {
  const trace::OpRecord& r = op.record;
  Ctx c{g, op, r};
  const std::string name = r.op;
  auto with_axis = [&](const char* type, int64_t axis) { attr(c.emit(type, {c.in(0)}), "axis", axis); };
  if (name == "rnn") return convert_rnn(g, op);
  if (name == "rnn_cell") return convert_rnn_cell(g, op);
  if (name == "full") return full(c);
  if (name == "arange") return arange(c);
  if (name == "where") return where(c);
  if (name == "sdpa") return sdpa(c);
  if (name == "linear") return linear(c);
  if (name == "layer_norm") return layer_norm(c);
  if (name == "sum" || name == "mean") return reduce(c, name == "mean");
  if (name == "softmax") return with_axis("Softmax", r.ints[0]);
  if (name == "log_softmax") return with_axis("LogSoftmax", r.ints[0]);
  if (name == "matmul") return void(c.emit("MatMul", {c.in(0), c.in(1)}));
  if (name == "embedding") return void(attr(c.emit("Gather", {c.in(0), c.in(1)}), "axis", int64_t(0)));
  if (name == "gather") return void(attr(c.emit("GatherElements", {c.in(0), c.in(1)}), "axis", r.ints[0]));
  if (name == "index_select") {
    const std::string index = c.g.op("Reshape", {c.in(1), c.g.ints({-1})});
    return void(attr(c.emit("Gather", {c.in(0), index}), "axis", r.ints[0]));
  }
  if (name == "cat") {
    std::vector<std::string> ins;
    for (size_t i = 0; i < r.inputs.size(); ++i)
      if (r.inputs[i].numel() > 0 || r.inputs[i].dim() > 1) ins.push_back(c.in(i));
    return void(attr(c.emit("Concat", ins), "axis", r.ints[0]));
  }
  if (name == "reshape") return void(c.emit("Reshape", {c.in(0), g.shape(c.sizes())}));
  if (name == "expand") return void(c.emit("Expand", {c.in(0), g.shape(c.sizes())}));
  if (name == "transpose") {
    std::vector<int64_t> perm(size_t(r.inputs[0].dim()));
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
    std::swap(perm[size_t(r.ints[0])], perm[size_t(r.ints[1])]);
    return void(attr(c.emit("Transpose", {c.in(0)}), "perm", perm));
  }
  if (name == "permute") return void(attr(c.emit("Transpose", {c.in(0)}), "perm", r.ints));
  if (name == "select") return select(c);
  if (name == "slice") return slice(c);
  if (name == "squeeze") return void(c.emit("Squeeze", {c.in(0), g.ints(r.ints)}));
  if (name == "unsqueeze") return void(c.emit("Unsqueeze", {c.in(0), g.ints(r.ints)}));
  if (name == "flatten") return flatten(c);
  if (name == "identity") return void(c.emit("Identity", {c.in(0)}));
  if (name == "cast") return void(attr(c.emit("Cast", {c.in(0)}), "to", int64_t(g.elem_type(DType(r.ints[0])))));
  // Elementwise ops record their op table's name and enum (autograd/functions/binary.cpp, unary.cpp).
  const auto is = [&](auto op, size_t count) {
    return r.ints.size() >= 1 && r.ints[0] >= 0 && r.ints[0] < int64_t(count) &&
           op_info(decltype(op)(r.ints[0])).name == r.op;
  };
  if (r.inputs.size() == 2 && r.floats.size() == 1 && is(BinaryOp{}, size_t(BinaryOp::kCount))) return binary(c);
  if (r.inputs.size() == 1 && r.floats.size() == 3 && is(UnaryOp{}, size_t(UnaryOp::kCount))) return unary(c);
  unsupported(op, "");
}

}  // namespace loom::onnx
