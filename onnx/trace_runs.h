// The traces of an export: the forward at the example's sizes and at grown sizes, compared to
// find which sizes follow which dynamic axis (Note [size provenance] in onnx/sizes.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onnx/export.h"
#include "onnx/tracer.h"

namespace loom::onnx {

// A named dynamic axis ("batch") and every input axis that carries it.
struct DynamicAxis {
  std::string name;
  int64_t size = 0;                                  // in the example
  std::vector<std::pair<size_t, int64_t>> axes;      // (input index, axis); the first is read in the graph
};

struct Traced {
  std::unique_ptr<GraphTracer> tracer;       // the example's run (stopped)
  std::vector<TracedOp> ops;                 // its ops, each size argument with its provenance
  std::vector<Tensor> outputs;
  std::vector<std::vector<std::optional<SymSize>>> output_dims;  // each output's dims (nullopt: no form fits)
};

// The axes named by `axes` (input -> {axis -> name}): one per name, in order of first use.
// ValueError where inputs give one name different sizes.
std::vector<DynamicAxis> dynamic_axes(const std::map<size_t, std::map<int64_t, std::string>>& axes,
                                      const std::vector<Tensor>& inputs, const std::vector<std::string>& input_names);

// Runs `forward` (the module already in eval mode, gradients off) at the example's sizes and
// the grown ones, and gives the example's trace with the provenance of its sizes. Errors name
// the op and module whose ops or arguments change with the sizes in a way ONNX cannot follow.
Traced trace_runs(nn::Module& module, const FlatForward& forward, const std::vector<Tensor>& inputs,
                  const std::vector<DynamicAxis>& axes);

}  // namespace loom::onnx
