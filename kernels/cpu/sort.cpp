// CPU sort and topk: each row's positions ordered by std::sort under the total order of
// Note [sort order] (kernels/math/sort_math.h), which makes the result the stable one; topk
// orders only its first k with std::partial_sort. Rows run in parallel.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/math/sort_math.h"

namespace loom::kernels::cpu {
namespace {

void sort(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending) {
  const int64_t rows = in.size(0), n = in.size(1), k = values.size(1);
  if (rows == 0 || k == 0) return;
  dispatch_all(in.dtype(), "sort", [&]<typename T>() {
    using M = opmath_t<T>;
    const T* x = static_cast<const T*>(in.data());
    T* vp = static_cast<T*>(values.data());
    int64_t* ip = static_cast<int64_t*>(indices.data());
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / n);
    parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::vector<M> key(static_cast<size_t>(n));
      for (int64_t r = begin; r < end; ++r) {
        const T* row = x + r * n;
        for (int64_t i = 0; i < n; ++i) key[size_t(i)] = M(row[i]);
        std::iota(order.begin(), order.end(), int64_t(0));
        auto before = [&](int64_t a, int64_t b) {
          return sort_math::sorts_before(key[size_t(a)], a, key[size_t(b)], b, descending);
        };
        if (k < n) std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        else std::sort(order.begin(), order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          vp[r * k + j] = row[order[size_t(j)]];
          ip[r * k + j] = order[size_t(j)];
        }
      }
    });
  });
}

}  // namespace

void add_sort_kernels(Backend& b) { b.sort = &sort; }

}  // namespace loom::kernels::cpu
