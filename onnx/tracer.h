// The Tracer of an export (core/trace.h): keeps each recorded op with the module path it ran
// in, and refuses a kernel that reads a traced tensor outside every recorded op.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/trace.h"
#include "nn/module.h"
#include "onnx/sizes.h"

namespace loom::onnx {

struct TracedOp {
  trace::OpRecord record;
  std::string path;  // "lstm (LSTM)": the module it ran in; "" at the top
  // The size arguments that follow a dynamic axis (Note [size provenance] in onnx/sizes.h),
  // by their index in record.ints / record.floats; the others are constants.
  std::map<size_t, SymSize> int_sizes, float_sizes;
};

class GraphTracer : public trace::Tracer {
 public:
  // Sets itself as the thread's tracer until destroyed; `inputs` are the graph's inputs.
  GraphTracer(nn::Module& root, const std::vector<Tensor>& inputs);
  ~GraphTracer() override { stop(); }
  void stop() { trace::detail::tracer = previous_; }  // the thread's previous tracer again
  GraphTracer(const GraphTracer&) = delete;
  GraphTracer& operator=(const GraphTracer&) = delete;

  void record(trace::OpRecord op) override;
  void kernel(const char* op, const std::vector<const Tensor*>& operands) override;
  void enter_module(const void* module) override;
  void exit_module() override;

  const std::vector<TracedOp>& ops() const { return ops_; }
  // Whether t shares memory with an input or a recorded op's output.
  bool is_traced(const Tensor& t) const;
  std::string where() const;  // the current module path, for messages

 private:
  trace::Tracer* previous_;
  std::unordered_map<const void*, std::string> names_;  // module -> "name (Type)"
  std::vector<const void*> stack_;
  std::unordered_set<const void*> traced_storage_;
  std::vector<TracedOp> ops_;
};

}  // namespace loom::onnx
