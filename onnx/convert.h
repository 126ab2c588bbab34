// Each recorded op as ONNX nodes (onnx/convert_ops.cpp; the recurrent layers in
// onnx/convert_rnn.cpp). NotImplementedError naming the op and its module for one without
// an ONNX form.
#pragma once

#include "onnx/graph.h"

namespace loom::onnx {

void convert_op(GraphBuilder& g, const TracedOp& op);
void convert_rnn(GraphBuilder& g, const TracedOp& op);
void convert_rnn_cell(GraphBuilder& g, const TracedOp& op);  // onnx/convert_cell.cpp

// "add in module fc (Linear)": the op and where it ran, for messages.
inline std::string describe(const TracedOp& op) { return std::string(op.record.op) + " in " + op.path; }

}  // namespace loom::onnx
