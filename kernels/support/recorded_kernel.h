// The router's hook for the profiler: a backend's kernel together with the op's name, called
// as the kernel itself. While a profiler::Profile records, the call is an op event (Note
// [profiler recording] in core/profiler.h): named after the op (the op table's name for
// unary, binary and reduce: "mul", not "binary"), on the device of its first CUDA operand
// (the CPU otherwise), with the operands' shapes and dtypes when they are asked for, and
// owning the allocation of its outputs when memory is recorded.
// Otherwise it costs one relaxed load and a branch predicted not taken.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "core/profiler.h"
#include "core/tensor.h"
#include "core/tensor_impl.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom::kernels {
namespace recording {

template <typename T>
inline constexpr bool is_op_enum =
    std::is_same_v<T, UnaryOp> || std::is_same_v<T, BinaryOp> || std::is_same_v<T, ReduceOp>;

// The op's name: the op table's for an elementwise or reduction op, the entry point's otherwise.
inline const char* op_name(const char* entry) { return entry; }
template <typename First, typename... Rest>
const char* op_name(const char* entry, const First& first, const Rest&...) {
  if constexpr (is_op_enum<First>)
    return op_info(first).name;
  else
    return entry;
}

// The tensor an argument carries, or null.
inline const Tensor* operand(const Tensor& t) { return t.defined() ? &t : nullptr; }
inline const Tensor* operand(const RNNLayerInput& in) { return &in.x; }
template <typename T>
const Tensor* operand(const T&) {
  return nullptr;
}

// The device whose clock times the op: its first CUDA operand's, else the CPU.
template <typename... A>
Device op_device(const A&... args) {
  Device device = kCPU;
  const auto look = [&](const Tensor* t) {
    if (device.is_cpu() && t && t->device().is_cuda()) device = t->device();
  };
  (look(operand(args)), ...);
  return device;
}

// Appends one argument to the JSON lists of shapes and dtypes (a tensor: its sizes and dtype;
// a number: [] and "Scalar"; anything else: [] and ""). The op enum is the name's already.
template <typename T>
void describe(const T& arg, std::string& shapes, std::string& dtypes) {
  if constexpr (is_op_enum<T>) return;
  if (shapes.size() > 1) shapes += ", ", dtypes += ", ";
  if (const Tensor* t = operand(arg)) {
    shapes += '[';
    for (size_t d = 0; d < t->sizes().size(); ++d) shapes += (d ? ", " : "") + std::to_string(t->sizes()[d]);
    shapes += ']';
    dtypes += std::string("\"") + dtype_name(t->dtype()) + '"';
  } else {
    shapes += "[]";
    dtypes += std::is_arithmetic_v<T> || std::is_same_v<T, Scalar> ? "\"Scalar\"" : "\"\"";
  }
}

// With profile_memory: a tensor operand whose storage was made just before the call is the op's
// output (ScopedEvent::adopt_allocation).
template <typename T>
void adopt_output(profiler::ScopedEvent& event, const T& arg) {
  const Tensor* t = operand(arg);
  if (t && t->impl()->storage) event.adopt_allocation(t->impl()->storage->data());
}

}  // namespace recording

template <typename F>
struct RecordedKernel;

template <typename R, typename... A>
struct RecordedKernel<R (*)(A...)> {
  R (*kernel)(A...);
  const char* op;

  R operator()(A... args) const {
    if (!profiler::is_recording() && !trace::outside_ops()) [[likely]]
      return kernel(std::forward<A>(args)...);
    return recorded(std::forward<A>(args)...);
  }

 private:
  [[gnu::noinline]] R recorded(A... args) const {
    // An ONNX export's tracer sees a kernel that no recorded op ran (Note [op tracing]).
    if (trace::outside_ops()) {
      std::vector<const Tensor*> operands;
      ((recording::operand(args) ? operands.push_back(recording::operand(args)) : void()), ...);
      trace::active()->kernel(recording::op_name(op, args...), operands);
    }
    profiler::ScopedEvent event(recording::op_name(op, args...), profiler::EventKind::Op,
                                recording::op_device(args...));
    if (event.recording() && profiler::is_recording_shapes()) {
      std::string shapes = "[", dtypes = "[";
      (recording::describe(args, shapes, dtypes), ...);
      event.set_inputs(shapes + "]", dtypes + "]");
    }
    if (event.recording() && profiler::is_recording_memory()) (recording::adopt_output(event, args), ...);
    return kernel(std::forward<A>(args)...);
  }
};

}  // namespace loom::kernels
