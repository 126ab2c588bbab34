// CPU kernel of kernels::multi_tensor_norm: the p-norm of every element of a list of
// tensors in one pass and no temporary tensor, in the fixed order of Note [fixed-order norm]
// (kernels/math/norm_math.h): one task per chunk of kNormChunk elements writes its partial to
// its own slot, and the slots are folded in list order after, so the bits do not depend on
// the thread count. The router has checked the operands.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/math/norm_math.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kLanes = 16;  // independent float sums (the compiler keeps them in vector registers)

// The partial of x[begin, end): in each run of kLanes * kNormRun elements, lane l takes
// elements l, l + kLanes, ... (kNormRun terms at most) in M; the lanes go into a double in
// lane order, run after run.
template <NormKind K, typename T>
double chunk_partial(const T* x, int64_t begin, int64_t end, double p) {
  using M = opmath_t<T>;
  const M pm = M(p);
  double partial = 0;
  for (int64_t run = begin; run < end; run += kLanes * kNormRun) {
    const int64_t run_end = std::min(end, run + kLanes * kNormRun);
    M acc[kLanes] = {};
    int64_t i = run;
    for (; i + kLanes <= run_end; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] = norm_fold(acc[l], norm_term(M(x[i + l]), K, pm), K);
    for (int l = 0; i < run_end; ++i, ++l) acc[l] = norm_fold(acc[l], norm_term(M(x[i]), K, pm), K);
    for (int l = 0; l < kLanes; ++l) partial = norm_fold(partial, double(acc[l]), K);
  }
  return partial;
}

template <NormKind K>
double tensor_chunk_partial(const Tensor& t, int64_t begin, double p) {
  const int64_t end = std::min(t.numel(), begin + kNormChunk);
  return dispatch_floating(t.dtype(), "multi_tensor_norm",
                           [&]<typename T>() { return chunk_partial<K>(static_cast<const T*>(t.data()), begin, end, p); });
}

template <NormKind K>
double total_of(const std::vector<Tensor>& tensors, double p) {
  struct Chunk {
    const Tensor* t;
    int64_t begin;
  };
  std::vector<Chunk> chunks;  // in list order
  for (const Tensor& t : tensors)
    for (int64_t b = 0; b < t.numel(); b += kNormChunk) chunks.push_back({&t, b});
  std::vector<double> partials(chunks.size());
  parallel_for(0, int64_t(chunks.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) partials[size_t(c)] = tensor_chunk_partial<K>(*chunks[size_t(c)].t, chunks[size_t(c)].begin, p);
  });
  double total = 0;
  for (double v : partials) total = norm_fold(total, v, K);
  return total;
}

void multi_tensor_norm(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  const NormKind kind = norm_kind(p);
  double total = 0;
  switch (kind) {
    case NormKind::One: total = total_of<NormKind::One>(tensors, p); break;
    case NormKind::Two: total = total_of<NormKind::Two>(tensors, p); break;
    case NormKind::Inf: total = total_of<NormKind::Inf>(tensors, p); break;
    case NormKind::P: total = total_of<NormKind::P>(tensors, p); break;
  }
  *static_cast<double*>(out.data()) = norm_root(total, kind, p);
}

}  // namespace

void add_norm_kernels(Backend& b) { b.multi_tensor_norm = &multi_tensor_norm; }

}  // namespace loom::kernels::cpu
