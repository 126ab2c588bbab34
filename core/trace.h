// The hook ONNX export records a forward through (onnx/export.h), as torch.onnx.export traces.
//
// Note [op tracing]
// While a Tracer is set on a thread, each op that has an ONNX form reports itself once it has
// run: its name, its input and output tensors, and the numbers it was called with (dims, sizes,
// scalars). An op opens an OpScope around its work; only the outermost scope of the thread
// records, so what an op calls inside (other ops, a module's own ops, kernels) is its own and
// not seen. A router kernel that runs outside any scope is reported too (kernels/
// recorded_kernel.h), so the tracer can refuse one that reads the inputs: an op without an
// ONNX form never slips into a graph as a constant. Off (no tracer), each hook costs one
// thread-local load and a branch predicted not taken.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace loom::trace {

struct OpRecord {
  const char* op = "";          // "add", "linear", "select", "rnn", ... (a string literal)
  std::vector<Tensor> inputs;   // an optional input that is missing stays undefined
  std::vector<Tensor> outputs;
  std::vector<int64_t> ints;    // dims, sizes, flags: each op says which
  std::vector<double> floats;   // scalars
  const void* module = nullptr; // a module recorded whole (an RNN): its nn::Module
};

class Tracer {
 public:
  virtual ~Tracer() = default;
  virtual void record(OpRecord op) = 0;
  // A router kernel ran outside every recorded op, on these tensors (undefined ones left out).
  virtual void kernel(const char* op, const std::vector<const Tensor*>& operands) = 0;
  // A module's forward begins or ends (called through its handle): for the paths in messages.
  virtual void enter_module(const void* module) = 0;
  virtual void exit_module() = 0;
};

namespace detail {
inline thread_local Tracer* tracer = nullptr;
inline thread_local int depth = 0;  // OpScopes open on this thread
}  // namespace detail

inline Tracer* active() noexcept { return detail::tracer; }
// Whether a kernel run now is outside every recorded op.
inline bool outside_ops() noexcept { return detail::tracer && detail::depth == 0; }

// Opened by a recorded op around its work (Note [op tracing]).
class OpScope {
 public:
  OpScope() noexcept : tracer_(detail::tracer) {
    if (tracer_) [[unlikely]]
      ++detail::depth;
  }
  ~OpScope() {
    if (tracer_) [[unlikely]]
      --detail::depth;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  // Whether this op records: a tracer is set and no recorded op encloses this one.
  explicit operator bool() const noexcept { return tracer_ && detail::depth == 1; }
  void record(OpRecord op) const { tracer_->record(std::move(op)); }

 private:
  Tracer* tracer_;
};

// Set by a module's handle around its forward while a tracer is set.
class ModuleScope {
 public:
  explicit ModuleScope(const void* module) : tracer_(detail::tracer) {
    if (tracer_) [[unlikely]]
      tracer_->enter_module(module);
  }
  ~ModuleScope() {
    if (tracer_) [[unlikely]]
      tracer_->exit_module();
  }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  Tracer* tracer_;
};

}  // namespace loom::trace
