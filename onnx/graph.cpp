#include "onnx/graph.h"

#include <cstring>
#include <unordered_set>

#include "core/factories.h"

namespace loom::onnx {

using ::onnx::TensorProto;

GraphBuilder::GraphBuilder(::onnx::GraphProto& graph, const ExportOptions& options, const GraphTracer& tracer,
                           nn::Module& root, std::vector<DynamicAxis> axes)
    : graph_(graph), options_(options), tracer_(tracer), axes_(std::move(axes)) {
  for (const auto& [name, t] : root.named_parameters()) param_names_[t.impl()] = name;
  for (const auto& [name, t] : root.named_buffers()) param_names_[t.impl()] = name;
}

DType GraphBuilder::export_dtype(DType dtype) const {
  const bool half = dtype == kFloat16 || dtype == kBFloat16;
  return half && !options_.keep_16bit_ ? kFloat32 : dtype;
}

int GraphBuilder::elem_type(DType dtype) const {
  switch (export_dtype(dtype)) {
    case DType::Float32: return TensorProto::FLOAT;
    case DType::Float64: return TensorProto::DOUBLE;
    case DType::Float16: return TensorProto::FLOAT16;
    case DType::BFloat16: return TensorProto::BFLOAT16;
    case DType::Int64: return TensorProto::INT64;
    case DType::Int32: return TensorProto::INT32;
    case DType::Bool: return TensorProto::BOOL;
  }
  LOOM_ASSERT(false, "onnx export: unknown dtype");
  return 0;
}

std::string GraphBuilder::fresh(const std::string& hint) {
  const int n = used_[hint]++;
  return n == 0 ? hint : hint + "_" + std::to_string(n);
}

// v named `name`, a tensor of `elem` type; returns its shape, to fill.
static ::onnx::TensorShapeProto* tensor_value(::onnx::ValueInfoProto* v, const std::string& name, int elem) {
  v->set_name(name);
  ::onnx::TypeProto_Tensor* type = v->mutable_type()->mutable_tensor_type();
  type->set_elem_type(elem);
  return type->mutable_shape();
}

void GraphBuilder::add_input(const Tensor& t, const std::string& name, const std::map<int64_t, std::string>& dynamic) {
  ::onnx::TensorShapeProto* shape = tensor_value(graph_.add_input(), name, elem_type(t.dtype()));
  for (int64_t a = 0; a < t.dim(); ++a) {
    auto it = dynamic.find(a);
    if (it == dynamic.end()) shape->add_dim()->set_dim_value(t.size(a));
    else shape->add_dim()->set_dim_param(it->second);  // "batch"
  }
  bind(t, name);
}

void GraphBuilder::add_output(const Tensor& t, const std::string& name,
                              const std::vector<std::optional<SymSize>>& dims) {
  ::onnx::TensorShapeProto* shape = tensor_value(graph_.add_output(), name, elem_type(t.dtype()));
  for (const std::optional<SymSize>& d : dims) {
    ::onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (d && d->is_constant()) dim->set_dim_value(d->offset);
    else if (d && d->is_symbol()) dim->set_dim_param(axes_[d->symbols[0]].name);
    // else: a size the graph computes (B·T) stays unnamed
  }
}

void GraphBuilder::bind(const Tensor& t, const std::string& name) { values_[t.impl()] = name; }

std::string GraphBuilder::value(const Tensor& t, const std::string& where) {
  if (!t.defined()) return "";
  auto it = values_.find(t.impl());
  if (it != values_.end()) return it->second;
  LOOM_CHECK(!tracer_.is_traced(t), NotImplementedError, "onnx export: ", where, " reads a tensor of shape ",
             shape_str(t.sizes()), " that depends on the model's inputs but was made by a view or op without an "
             "ONNX form (see docs/onnx.md)");
  // Constant folding: a tensor no input reaches is a constant of the graph.
  const std::string name = initializer(t, constant_name(t));
  bind(t, name);
  return name;
}

std::string GraphBuilder::constant_name(const Tensor& t) const {
  auto param = param_names_.find(t.impl());
  return param != param_names_.end() ? param->second : "const";
}

std::string GraphBuilder::initializer(const Tensor& t_in, const std::string& hint) {
  const Tensor t = t_in.detach().to(kCPU).to(export_dtype(t_in.dtype())).contiguous();
  TensorProto* p = graph_.add_initializer();
  const std::string name = fresh(hint);
  p->set_name(name);
  p->set_data_type(elem_type(t.dtype()));
  for (int64_t s : t.sizes()) p->add_dims(s);
  p->set_raw_data(t.data(), size_t(t.numel() * element_size(t.dtype())));  // little-endian, as ONNX's raw_data
  return name;
}

std::string GraphBuilder::ints(const std::vector<int64_t>& v) {
  return initializer(from_vector(v), "ints");
}

std::string GraphBuilder::scalar(double v, DType dtype) {
  return initializer(full({}, v, TensorOptions(export_dtype(dtype))), "scalar");
}

::onnx::NodeProto& GraphBuilder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                      const std::vector<std::string>& outputs) {
  ::onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op_type);
  n->set_name(fresh(op_type + "_node"));
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return *n;
}

std::string GraphBuilder::op(const std::string& op_type, const std::vector<std::string>& inputs) {
  const std::string out = fresh(op_type);
  node(op_type, inputs, {out});
  return out;
}

std::string GraphBuilder::dim(const SymSize& size) {
  if (size.is_constant()) return ints({size.offset});
  std::string v;
  for (size_t a : size.symbols) {
    auto& read = axis_values_[a];
    if (read.empty()) {  // Shape(input)[axis:axis + 1], where the axis is first carried
      const auto [input, axis] = axes_[a].axes.front();
      ::onnx::NodeProto& n = node("Shape", {graph_.input(int(input)).name()}, {read = fresh(axes_[a].name)});
      attr(n, "start", axis), attr(n, "end", axis + 1);
    }
    v = v.empty() ? read : op("Mul", {v, read});
  }
  if (size.scale != 1) v = op("Mul", {v, ints({size.scale})});
  if (size.offset != 0) v = op("Add", {v, ints({size.offset})});
  return v;
}

std::string GraphBuilder::shape(const std::vector<SymSize>& sizes) {
  std::vector<std::string> parts;
  std::vector<int64_t> run;  // constants not yet emitted
  auto flush = [&] {
    if (!run.empty()) parts.push_back(ints(run)), run.clear();
  };
  for (const SymSize& s : sizes) {
    if (s.is_constant()) {
      run.push_back(s.offset);
      continue;
    }
    flush();
    parts.push_back(dim(s));
  }
  flush();
  if (parts.size() == 1) return parts[0];
  ::onnx::NodeProto& n = node("Concat", parts, {fresh("shape")});
  attr(n, "axis", int64_t(0));
  return n.output(0);
}

void GraphBuilder::prune() {
  std::unordered_set<std::string> used;
  for (const auto& o : graph_.output()) used.insert(o.name());
  std::vector<bool> keep(size_t(graph_.node_size()), false);
  for (int i = graph_.node_size() - 1; i >= 0; --i) {  // nodes are in topological order
    const ::onnx::NodeProto& n = graph_.node(i);
    for (const std::string& o : n.output()) keep[size_t(i)] = keep[size_t(i)] || used.count(o) > 0;
    if (keep[size_t(i)]) used.insert(n.input().begin(), n.input().end());
  }
  ::google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
  for (int i = 0; i < graph_.node_size(); ++i)
    if (keep[size_t(i)]) nodes.Add()->Swap(graph_.mutable_node(i));
  graph_.mutable_node()->Swap(&nodes);
  ::google::protobuf::RepeatedPtrField<::onnx::TensorProto> inits;
  for (auto& t : *graph_.mutable_initializer())
    if (used.count(t.name())) inits.Add()->Swap(&t);
  graph_.mutable_initializer()->Swap(&inits);
}

void attr(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  ::onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name), a->set_type(::onnx::AttributeProto::INT), a->set_i(v);
}
void attr(::onnx::NodeProto& n, const std::string& name, float v) {
  ::onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name), a->set_type(::onnx::AttributeProto::FLOAT), a->set_f(v);
}
void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  ::onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name), a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void attr(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  ::onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name), a->set_type(::onnx::AttributeProto::STRING), a->set_s(v);
}
void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<std::string>& v) {
  ::onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name), a->set_type(::onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
}

}  // namespace loom::onnx
