// CPU reductions (sum, mean, max, min, prod) over any set of dims.
//
// Note [reduction layout]
// A contiguous input whose reduced dims form one block [r0, r1] is read as (A, N, C):
// out[a, c] = reduce_n x[a, n, c], with A = the dims before the block, N = the block and
// C = the dims after it. C == 1 reduces contiguous rows (a SIMD reduction per output);
// C > 1 accumulates whole rows of C outputs (a vectorised loop over c), which is how a
// sum over the batch or a mean over time stays a streaming pass. Any other layout is
// first copied so that the reduced dims come last and become contiguous rows.
#include <limits>
#include <vector>

#include "core/factories.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/math/functors.h"
#include "kernels/math/reduce_math.h"

namespace loom::kernels::cpu {
namespace {

// out[a * C + c] = reduce over n of x[(a * N + n) * C + c].
template <ReduceOp OP, typename T>
void reduce_anc(T* out, const T* x, int64_t A, int64_t N, int64_t C) {
  using M = opmath_t<T>;
  using R = ReduceMath<OP, M>;
  if (C == 1) {
    parallel_for(0, A, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N, 1)), [&](int64_t b, int64_t e) {
      for (int64_t a = b; a < e; ++a) {
        const T* row = x + a * N;
        M acc = R::identity();
        if constexpr (OP == ReduceOp::Sum || OP == ReduceOp::Mean) {
#pragma omp simd reduction(+ : acc)
          for (int64_t n = 0; n < N; ++n) acc += M(row[n]);
        } else {
          for (int64_t n = 0; n < N; ++n) acc = R::combine(acc, M(row[n]));
        }
        out[a] = T(R::finish(acc, N));
      }
    });
    return;
  }
  // Split the A * C outputs into (a, c-chunk) tiles so that both small A and small C
  // still give every thread work; each tile accumulates its rows in order.
  const int64_t c_chunk = std::min<int64_t>(C, 1024);
  const int64_t tiles_per_a = (C + c_chunk - 1) / c_chunk;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N * c_chunk, 1));
  parallel_for(0, A * tiles_per_a, grain, [&](int64_t b, int64_t e) {
    std::vector<M> acc(static_cast<size_t>(c_chunk));
    for (int64_t tile = b; tile < e; ++tile) {
      const int64_t a = tile / tiles_per_a;
      const int64_t c0 = (tile % tiles_per_a) * c_chunk;
      const int64_t nc = std::min(c_chunk, C - c0);
      std::fill(acc.begin(), acc.begin() + nc, R::identity());
      for (int64_t n = 0; n < N; ++n) {
        const T* row = x + (a * N + n) * C + c0;
        M* accp = acc.data();
        for (int64_t c = 0; c < nc; ++c) accp[c] = R::combine(accp[c], M(row[c]));
      }
      T* o = out + a * C + c0;
      for (int64_t c = 0; c < nc; ++c) o[c] = T(R::finish(acc[size_t(c)], N));
    }
  });
}


void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const Dims& dims) {
  LOOM_ASSERT(!dims.empty() && out.dtype() == in.dtype(), "reduce: bad arguments");
  const int64_t nd = in.dim();
  std::vector<bool> reduced(size_t(nd), false);
  for (int64_t d : dims) reduced[size_t(d)] = true;
  const int64_t r0 = dims.front(), r1 = dims.back();
  const bool one_block = r1 - r0 + 1 == int64_t(dims.size());

  Tensor x = in;
  int64_t A = 1, N = 1, C = 1;
  if (in.is_contiguous() && one_block) {
    for (int64_t d = 0; d < nd; ++d) (d < r0 ? A : d <= r1 ? N : C) *= in.size(d);
  } else {
    // Kept dims first, reduced dims last, then make it contiguous: rows of N.
    Dims order;
    for (int64_t d = 0; d < nd; ++d)
      if (!reduced[size_t(d)]) order.push_back(d);
    for (int64_t d : dims) order.push_back(d);
    Tensor permuted = in.detach().permute(order);
    x = empty(permuted.sizes(), permuted.options());
    copy(x, permuted);
    for (int64_t d = 0; d < nd; ++d) (reduced[size_t(d)] ? N : A) *= in.size(d);
  }
  Tensor o = out.is_contiguous() ? out : empty(out.sizes(), out.options());
  dispatch_all(in.dtype(), "reduce", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      LOOM_ASSERT(false, "reduce: bool input (the caller converts it)");
    } else {
      dispatch_enum(op, [&]<ReduceOp OP>() {
        reduce_anc<OP, T>(static_cast<T*>(o.data()), static_cast<const T*>(x.data()), A, N, C);
      });
    }
  });
  if (!o.is_same(out)) copy(out, o);
}

}  // namespace

void add_reduce_kernels(Backend& b) { b.reduce = &reduce; }

}  // namespace loom::kernels::cpu
