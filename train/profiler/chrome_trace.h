// A profile as a trace in the Trace Event format (chrome://tracing, ui.perfetto.dev), laid out
// as torch.profiler's Kineto traces are, so that TensorBoard's profile plugin reads it too.
//
// Note [trace layout]
// - The process (pid: the OS's) has one track per thread (tid: the OS's thread id, named by
//   thread_name metadata); each GPU is a process of its own (pid: the device index), with one
//   track per stream.
// - Ops and autograd nodes are "X" events of category "cpu_op"; Loom's ranges (steps,
//   optimizer, DataLoader) and users' are "user_annotation", as PyTorch's record_function.
//   Each has args "External id" (its event id) and, with record_shapes, "Input Dims" and
//   "Input type".
// - An op on a CUDA device adds a "kernel" event on its stream: the span between its two
//   timing events, so every kernel the op queued, from the first one's start to the last
//   one's end (Loom sees the op, not the kernels inside it: that needs CUPTI). It is linked
//   to the op as Kineto links a kernel to its launch: a runtime event named
//   cudaEventRecord (the host time spent queueing the first timing event, inside the op)
//   with the same "correlation", and a flow arrow ("ac2g") from that event to the kernel. Its
//   category is "runtime", as in the Kineto traces TensorBoard's profile plugin was written for
//   (newer ones say "cuda_runtime", which the plugin does not read).
// - With profile_memory, each allocation and free is an instant event "[memory]" with args
//   Bytes (negative: freed), Addr, Total Allocated, Device Type (0 CPU, 1 CUDA), Device Id.
// - ts and dur are microseconds, ts since the recording began; baseTimeNanoseconds is the
//   wall clock (Unix nanoseconds) at ts 0.
#pragma once

#include <string>

#include "core/profiler.h"

namespace loom::profiler {

// The trace as one JSON document (Profile::export_chrome_trace writes it to a file).
std::string chrome_trace_json(const Recording& r);

}  // namespace loom::profiler
