// The deterministic index_add (the embedding backward): out[o, index[n], i] += src[o, n, i]
// for contiguous out (O, V, In) and src (O, N, In), without atomics.
//
// Note [sorted index_add]
// Atomic adds make the order of a row's sum depend on scheduling, so float results vary
// from run to run. Instead the index is sorted stably (cub::DeviceRadixSort on (value,
// position) pairs), which puts each output row's contributions next to each other in
// position order. Then one thread per (o, k, i) whose sorted slot k starts a run of equal
// values walks that run and adds its src rows into out in order: every output element
// has one writer, and it adds in the CPU's order (out, then positions ascending), so the
// result is bit-for-bit the CPU's. The walk is a LOOM_HOST_DEVICE function of the thread
// index, so the host tests check it with std::stable_sort in place of CUB.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/half.h"

namespace loom::kernels::cuda {

struct SortedIndexAddGeometry {
  int64_t outer, rows, inner;  // out (outer, rows, inner); src (outer, n, inner)
  int64_t n;                   // index length
};

// Thread t of outer · n · inner: t = (o, k, i) with i fastest. keys (n): the sorted index
// values; positions (n): their positions in the original index.
template <typename T>
LOOM_HOST_DEVICE inline void sorted_index_add_at(int64_t t, T* out, const T* src, const uint64_t* keys,
                                                 const int64_t* positions, const SortedIndexAddGeometry& g) {
  const int64_t i = t % g.inner, k = (t / g.inner) % g.n, o = t / (g.inner * g.n);
  const uint64_t key = keys[k];
  if (k > 0 && keys[k - 1] == key) return;  // not the start of a run
  if (key >= uint64_t(g.rows)) return;      // out of range: the caller's check; never write
  using M = opmath_t<T>;
  T* dst = out + (o * g.rows + int64_t(key)) * g.inner + i;
  // Rounded to T after every add, as the CPU's `*d = T(M(*d) + M(*s))`.
  T acc = *dst;
  for (int64_t j = k; j < g.n && keys[j] == key; ++j) acc = T(M(acc) + M(src[(o * g.n + positions[j]) * g.inner + i]));
  *dst = acc;
}

}  // namespace loom::kernels::cuda
