#include "onnx/tracer.h"

namespace loom::onnx {
namespace {
const void* storage_of(const Tensor& t) { return t.impl()->storage.get(); }
}  // namespace

GraphTracer::GraphTracer(nn::Module& root, const std::vector<Tensor>& inputs) : previous_(trace::detail::tracer) {
  for (const auto& [name, m] : root.named_modules())
    names_[m.get()] = (name.empty() ? std::string("<model>") : name) + " (" + m->type_name() + ")";
  for (const Tensor& t : inputs) traced_storage_.insert(storage_of(t));
  trace::detail::tracer = this;
}

void GraphTracer::record(trace::OpRecord op) {
  // An op's outputs depend on the inputs where one of its own inputs does: a view of a
  // parameter (MultiheadAttention's narrow of in_proj_weight) stays a constant.
  bool reads_inputs = false;
  for (const Tensor& t : op.inputs) reads_inputs = reads_inputs || is_traced(t);
  if (reads_inputs)
    for (const Tensor& t : op.outputs)
      if (t.defined()) traced_storage_.insert(storage_of(t));
  ops_.push_back({std::move(op), where(), {}, {}});
}

void GraphTracer::kernel(const char* op, const std::vector<const Tensor*>& operands) {
  for (const Tensor* t : operands)
    LOOM_CHECK(!is_traced(*t), NotImplementedError, "onnx export: ", op, " in ", where(),
               " reads the model's inputs but has no ONNX form (Loom records only the ops listed in docs/onnx.md)");
}

void GraphTracer::enter_module(const void* module) { stack_.push_back(module); }
void GraphTracer::exit_module() {
  if (!stack_.empty()) stack_.pop_back();
}

bool GraphTracer::is_traced(const Tensor& t) const {
  return t.defined() && traced_storage_.count(storage_of(t)) > 0;
}

std::string GraphTracer::where() const {
  if (stack_.empty()) return "the model's forward";
  auto it = names_.find(stack_.back());
  return "module " + (it == names_.end() ? std::string("?") : it->second);
}

}  // namespace loom::onnx
