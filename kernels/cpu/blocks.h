// The (outer, len, inner) block layout shared by the CPU kernels that work along dims
// (Note [block layout] in kernels/cpu/arg_reduce.cpp): the input as a contiguous block,
// processed in parallel tiles of up to kTile adjacent inner columns.
#pragma once

#include <algorithm>

#include "core/factories.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace loom::kernels::cpu {

constexpr int64_t kTile = 64;

struct Block {
  Tensor x;  // contiguous (outer, len, inner)
  int64_t outer = 1, len = 1, inner = 1;
  Dims order;  // non-empty when x is a copy of in.permute(order)
};

// Calls fn(o, c0, nc) for every outer index o and tile [c0, c0 + nc) of the inner
// columns, in parallel (inner == 1 gives one single-column tile per row); each call reads
// len elements per column.
template <typename F>
void for_each_tile(const Block& b, F fn) {
  const int64_t tile = std::min(b.inner, kTile);
  const int64_t tiles = (b.inner + tile - 1) / tile;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(b.len * tile, 1));
  parallel_for(0, b.outer * tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c0 = (i % tiles) * tile;
      fn(i / tiles, c0, std::min(tile, b.inner - c0));
    }
  });
}

// out itself when contiguous, else a contiguous buffer to copy into out afterwards.
inline Tensor contiguous_out(const Tensor& out) {
  return out.is_contiguous() ? out : empty(out.sizes(), out.options());
}

}  // namespace loom::kernels::cpu
