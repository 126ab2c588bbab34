// The graph an export writes, as ONNX's own GraphProto (the messages libonnx-dev generated
// from onnx.proto): value names for Loom's tensors, nodes, initializers, and the sizes that
// stay dynamic. Only onnx/*.cpp include this header (protobuf stays out of Loom's interface).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/tensor.h"
#include "onnx/export.h"
#include "onnx/trace_runs.h"

namespace loom::onnx {

class GraphBuilder {
 public:
  GraphBuilder(::onnx::GraphProto& graph, const ExportOptions& options, const GraphTracer& tracer,
               nn::Module& root, std::vector<DynamicAxis> axes);

  // A graph input: t with these axes dynamic (axis -> name).
  void add_input(const Tensor& t, const std::string& name, const std::map<int64_t, std::string>& dynamic);
  // A graph output: t, each dim declared as its axis, a constant, or unnamed (nullopt).
  void add_output(const Tensor& t, const std::string& name, const std::vector<std::optional<SymSize>>& dims);

  // The value holding t: a graph input or an op's output, else a constant initializer (a
  // parameter under its state-dict name). NotImplementedError when t shares memory with a
  // traced tensor but no recorded op made it (a view or op without an ONNX form); `where`
  // names the op and module for that message.
  std::string value(const Tensor& t, const std::string& where);
  void bind(const Tensor& t, const std::string& name);  // t is held by this value
  std::string fresh(const std::string& hint);           // a new unique value name

  ::onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs);
  // One output named after the op type.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs);

  std::string initializer(const Tensor& t, const std::string& name);  // a constant (cast per the options)
  // A parameter's or buffer's state-dict name ("fc.weight"), else "const": a constant's name.
  std::string constant_name(const Tensor& t) const;
  std::string ints(const std::vector<int64_t>& v);                    // a 1-D int64 constant
  std::string scalar(double v, DType dtype);                          // a 0-D constant of dtype

  // A size as a 1-D int64 value of one element: a constant, or computed from the inputs'
  // Shape where it follows a dynamic axis (Note [size provenance] in onnx/sizes.h).
  std::string dim(const SymSize& size);
  // A 1-D int64 shape of these sizes (-1 and 0 stay as they are: Reshape's "infer" and "copy").
  std::string shape(const std::vector<SymSize>& sizes);

  // Drops the nodes no graph output reaches (ops whose results the forward discarded) and
  // the initializers no node reads.
  void prune();

  int elem_type(DType dtype) const;  // ONNX's TensorProto.DataType (16-bit -> FLOAT unless kept)
  DType export_dtype(DType dtype) const;
  int64_t opset() const { return options_.opset_; }

 private:
  ::onnx::GraphProto& graph_;
  const ExportOptions& options_;
  const GraphTracer& tracer_;
  std::unordered_map<const TensorImpl*, std::string> values_;
  std::unordered_map<const TensorImpl*, std::string> param_names_;
  std::vector<DynamicAxis> axes_;
  std::map<size_t, std::string> axis_values_;  // axis -> its 1-D value, read once
  std::map<std::string, int> used_;
};

// Attributes.
void attr(::onnx::NodeProto& n, const std::string& name, int64_t v);
void attr(::onnx::NodeProto& n, const std::string& name, float v);
void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);
void attr(::onnx::NodeProto& n, const std::string& name, const std::string& v);
void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<std::string>& v);

}  // namespace loom::onnx
