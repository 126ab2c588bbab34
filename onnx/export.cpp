#include "onnx/export.h"

#include <filesystem>
#include <fstream>

#include "autograd/grad_mode.h"
#include "onnx/convert.h"
#include "onnx/graph.h"

namespace loom::onnx {
namespace {

// Restores a module's training mode when the export ends, thrown or not.
struct EvalGuard {
  nn::Module& m;
  bool was_training = m.is_training();
  explicit EvalGuard(nn::Module& m) : m(m) { m.eval(); }
  ~EvalGuard() { m.train(was_training); }
};

// PATH.partial while an export writes; removed unless committed (renamed over PATH).
struct PartialFile {
  std::string path, partial = path + ".partial";
  std::ofstream out;
  bool done = false;
  explicit PartialFile(std::string p) : path(std::move(p)), out(partial, std::ios::binary | std::ios::trunc) {
    LOOM_CHECK(out.good(), SerializationError, "onnx export: cannot open ", partial, " for writing");
  }
  void commit() {
    out.close();
    std::error_code ec;
    std::filesystem::rename(partial, path, ec);
    LOOM_CHECK(!ec, SerializationError, "onnx export: cannot move ", partial, " to ", path, ": ", ec.message());
    done = true;
  }
  ~PartialFile() {
    if (done) return;
    out.close();
    std::error_code ec;
    std::filesystem::remove(partial, ec);
  }
};

// The default dynamic axes (the Note in onnx/export.h).
std::map<size_t, std::map<int64_t, std::string>> default_dynamic_axes(const std::vector<Tensor>& in) {
  std::map<size_t, std::map<int64_t, std::string>> axes;
  if (in.empty() || in[0].dim() == 0) return axes;
  const int64_t batch = in[0].size(0);
  const bool sequence = in[0].dim() >= 2 && (in[0].dim() == 3 || !in[0].is_floating_point());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dim() > 0 && in[i].size(0) == batch) axes[i][0] = "batch";
    if (sequence && in[i].dim() == in[0].dim() && in[i].size(1) == in[0].size(1)) axes[i][1] = "sequence";
  }
  return axes;
}

std::string name_at(const std::vector<std::string>& names, size_t i, const char* prefix) {
  return i < names.size() ? names[i] : prefix + std::to_string(i);
}

}  // namespace

void export_model(nn::Module& module, const FlatForward& forward, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options) {
  LOOM_CHECK(options.opset_ >= 17 && options.opset_ <= 23, ValueError, "onnx export: opset ", options.opset_,
             " is not supported (17 to 23)");
  for (size_t i = 0; i < example_inputs.size(); ++i)
    LOOM_CHECK(example_inputs[i].defined(), ValueError, "onnx export: example input ", i, " is undefined");
  // The model goes to PATH.partial, opened first (a path that cannot be written fails before
  // the trace) and renamed over PATH at the end: a failed export leaves PATH as it was.
  PartialFile file(path);

  ::onnx::ModelProto model;
  model.set_ir_version(8);  // ONNX 1.10+, which reads opsets up to 17; raised below for newer opsets
  if (options.opset_ >= 19) model.set_ir_version(9);
  if (options.opset_ >= 21) model.set_ir_version(10);
  if (options.opset_ >= 23) model.set_ir_version(11);
  model.set_producer_name("loom");
  model.set_producer_version("0.1.0");
  ::onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset_);
  ::onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(module.type_name());

  const auto axes = options.has_dynamic_axes_ ? options.dynamic_axes_ : default_dynamic_axes(example_inputs);
  std::vector<DynamicAxis> dynamic = dynamic_axes(axes, example_inputs, options.input_names_);
  Traced traced;
  {
    EvalGuard eval(module);
    NoGradGuard no_grad;
    traced = trace_runs(module, forward, example_inputs, dynamic);
  }
  // The tracer is stopped: the builder's own tensor work (gate reordering) is not the model's.
  GraphBuilder g(graph, options, *traced.tracer, module, std::move(dynamic));
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    auto it = axes.find(i);
    g.add_input(example_inputs[i], name_at(options.input_names_, i, "input_"),
                it == axes.end() ? std::map<int64_t, std::string>{} : it->second);
  }
  for (const TracedOp& op : traced.ops) convert_op(g, op);
  for (size_t i = 0; i < traced.outputs.size(); ++i) {
    const std::string name = name_at(options.output_names_, i, "output_");
    const std::string v = g.value(traced.outputs[i], "output " + name);
    g.node("Identity", {v}, {name});
    g.add_output(traced.outputs[i], name, traced.output_dims[i]);
  }
  g.prune();
  LOOM_CHECK(model.SerializeToOstream(&file.out) && file.out.flush().good(), SerializationError,
             "onnx export: writing ", file.partial, " failed");
  file.commit();
}

}  // namespace loom::onnx
