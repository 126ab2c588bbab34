// The Philox key and counter a CUDA random kernel draws with, graph-safe.
//
// Note [graph-safe random numbers]
// Eagerly, a random kernel gets the generator's seed and the first counter of the range it
// reserved (core/generator.h) as launch arguments. A CUDA graph would replay those
// arguments, drawing the same numbers every step, so while this thread captures a graph
// (core/cuda_graph.h) the kernel gets instead a pointer to two device words the graph owns,
// {seed, base}, and its counter relative to the capture's start: it draws with key
// words[0] and counter words[1] + offset. Before each replay the graph writes the default
// generator's seed and a freshly reserved base into those words (one tiny kernel on the
// replay's stream: no host sync), reserving as many counters as the captured step used;
// the capture itself reserves none (the generator is rewound at its end), as PyTorch's
// graph-safe Philox does. So a graphed step draws exactly the numbers the same step would
// draw eagerly, and a manual_seed() between replays takes effect at the next replay.
// Only the default generator can be captured: a kernel drawing from another one during a
// capture is a CaptureError, as are the ops that still take host-side seeds (multinomial,
// attention with dropout).
#pragma once

#include <cstdint>

#include "core/half.h"  // LOOM_HOST_DEVICE

namespace loom::cuda {

struct PhiloxArgs {
  uint64_t seed = 0;
  uint64_t offset = 0;                     // the first counter; relative to *graph_state's base when captured
  const uint64_t* graph_state = nullptr;   // device {seed, base} of a captured graph, or null

  LOOM_HOST_DEVICE uint64_t key() const { return graph_state ? graph_state[0] : seed; }
  LOOM_HOST_DEVICE uint64_t counter() const { return graph_state ? graph_state[1] + offset : offset; }
};

namespace detail {
// The arguments for a random kernel on `device` drawing counters [offset, ...) of the
// default generator at `seed`: as given when this thread is not capturing on that device,
// graph-relative when it is (CaptureError naming `op` if they are not the default
// generator's). kernels/cuda/graph.cpp.
PhiloxArgs philox_args(int device, uint64_t seed, uint64_t offset, const char* op);
}  // namespace detail

}  // namespace loom::cuda
