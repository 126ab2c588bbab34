// ONNX export of a Loom model, as torch.onnx.export: the module's forward runs once, in eval
// mode and without gradients, on example inputs; the ops it runs are recorded (Note [op
// tracing] in core/trace.h) and written as an ONNX model through ONNX's own protobuf schema.
//
//   loom::onnx::export_model(model, {tokens, lengths}, "model.onnx",
//                            loom::onnx::ExportOptions().input_names({"tokens", "lengths"}));
//
// Dynamic axes: by default axis 0 of every input whose size there is the first input's
// (the batch) and, where the first input is of integers (token ids) or has 3 dims, its axis 1
// (the sequence). A size the forward computes from a dynamic axis (a reshape to (B·T, H), a
// zeros({B, hidden}), an index T - 1) is computed from the input's shape in the graph: the
// export traces the forward at grown sizes too, to find which sizes follow which axis (Note
// [size provenance] in onnx/sizes.h), so the example's sizes may coincide with each other or
// with the model's. docs/onnx.md lists the ops and layers that export.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "nn/rnn.h"

namespace loom::onnx {

struct ExportOptions {
  ExportOptions& opset(int64_t v) { opset_ = v; return *this; }
  ExportOptions& input_names(std::vector<std::string> v) { input_names_ = std::move(v); return *this; }
  ExportOptions& output_names(std::vector<std::string> v) { output_names_ = std::move(v); return *this; }
  // Input index -> {axis -> name}: replaces the default dynamic axes of every input.
  ExportOptions& dynamic_axes(std::map<size_t, std::map<int64_t, std::string>> v) {
    dynamic_axes_ = std::move(v);
    has_dynamic_axes_ = true;
    return *this;
  }
  // float16/bfloat16 parameters and values kept as they are (default: exported as float32).
  ExportOptions& keep_16bit(bool v) { keep_16bit_ = v; return *this; }

  int64_t opset_ = 17;  // 17 to 23
  std::vector<std::string> input_names_, output_names_;  // default input_0..., output_0...
  std::map<size_t, std::map<int64_t, std::string>> dynamic_axes_;
  bool has_dynamic_axes_ = false;
  bool keep_16bit_ = false;
};

// The forward as a function of a flat list of tensors, returning a flat list.
using FlatForward = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Traces forward(example_inputs) with `module` in eval mode (its mode is restored after) and
// writes the model to path (through path.partial: a failed export leaves path as it was).
// NotImplementedError naming the op and its module path where an op has no ONNX form or its
// sizes follow the inputs in a way the graph cannot compute; SerializationError when path
// cannot be written; ValueError for bad options or a forward that fails at grown sizes.
void export_model(nn::Module& module, const FlatForward& forward, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options = {});

namespace detail {
// A forward's result as a flat list: a tensor; an RNN's output, h_n and c_n; a state's h and c;
// pairs and tuples of those, in order. Undefined tensors are left out.
inline void flatten(const Tensor& t, std::vector<Tensor>& out) {
  if (t.defined()) out.push_back(t);
}
inline void flatten(const nn::RNNOutput& r, std::vector<Tensor>& out) {
  flatten(r.output, out), flatten(r.h_n, out), flatten(r.c_n, out);
}
inline void flatten(const nn::RNNState& s, std::vector<Tensor>& out) { flatten(s.h, out), flatten(s.c, out); }
template <typename A, typename B>
void flatten(const std::pair<A, B>& p, std::vector<Tensor>& out) {
  flatten(p.first, out), flatten(p.second, out);
}
template <typename... T>
void flatten(const std::tuple<T...>& t, std::vector<Tensor>& out) {
  std::apply([&](const auto&... e) { (flatten(e, out), ...); }, t);
}
}  // namespace detail

// model(inputs...) for a module handle (nn::Linear) or a shared_ptr to a module whose forward
// takes N tensors.
template <size_t N, typename Model>
void export_model(const Model& model, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options = {}) {
  LOOM_CHECK(example_inputs.size() == N, ValueError, "onnx export: the forward takes ", N, " inputs, got ",
             example_inputs.size(), " example inputs");
  const FlatForward forward = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    [&]<size_t... I>(std::index_sequence<I...>) { detail::flatten(model->forward(in[I]...), out); }
    (std::make_index_sequence<N>());
    return out;
  };
  export_model(*model, forward, example_inputs, path, options);
}

}  // namespace loom::onnx
