// CPU multinomial: the draws of Note [multinomial draws] (kernels/math/multinomial_math.h),
// row by row in parallel; without replacement the race keys are sorted by kernels::sort.
#include "core/factories.h"
#include "core/parallel.h"
#include "kernels/cpu/backend.h"
#include "kernels/math/multinomial_math.h"

namespace loom::kernels::cpu {
namespace {

namespace mm = multinomial_math;

void multinomial(const Tensor& out, const Tensor& probs, bool replacement, uint64_t seed, uint64_t offset) {
  const int64_t rows = probs.size(0), categories = probs.size(1), samples = out.size(1);
  dispatch_floating(probs.dtype(), "multinomial", [&]<typename T>() {
    const T* p = static_cast<const T*>(probs.data());
    for (int64_t r = 0; r < rows; ++r)
      mm::throw_if_invalid(mm::check_row(p + r * categories, categories), r, categories, samples, replacement);
    if (samples == 0) return;
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / (categories * (replacement ? samples : 1)));
    if (replacement) {
      int64_t* o = static_cast<int64_t*>(out.data());
      parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          for (int64_t s = 0; s < samples; ++s)
            o[r * samples + s] = mm::draw_with_replacement(p + r * categories, categories, r * samples + s, seed, offset);
      });
      return;
    }
    // On probs' device: the CPU's, or the host-emulated cuda:0 (core/cuda_emulation.h).
    const TensorOptions scratch = TensorOptions(kFloat64).device(probs.device());
    Tensor keys = empty({rows, categories}, scratch);  // (rows, categories)
    double* kp = keys.data_ptr<double>();
    parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin * categories; i < end * categories; ++i)
        kp[i] = mm::race_key(mm::weight(p[i]), i, seed, offset);
    });
    kernels::sort(empty({rows, samples}, scratch), out, keys, /*descending=*/true);
  });
}

}  // namespace

void add_multinomial_kernels(Backend& b) { b.multinomial = &multinomial; }

}  // namespace loom::kernels::cpu
