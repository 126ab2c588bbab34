// CPU random fills from Philox (Note [random numbers] in core/generator.h): element i
// uses words 2i and 2i+1 of the stream that starts at block `offset` (four words a
// block), so any split of the work gives the same numbers. The per-element formulas live
// in kernels/math/random_math.h, shared with the CUDA kernels, which give the same numbers.
#include <algorithm>

#include "core/factories.h"
#include "kernels/cpu/backend.h"
#include "kernels/cpu/loops.h"
#include "kernels/math/random_math.h"

namespace loom::kernels::cpu {
namespace {

// dst[i] = f(w0, w1, i) in row-major element order, with words_of(i)'s words: the Philox
// block that elements 2m and 2m + 1 share is computed once for both.
template <typename T, typename F>
void fill_random(const Tensor& dst, uint64_t seed, uint64_t offset, F f) {
  Tensor target = dst.is_contiguous() ? dst : empty(dst.sizes(), dst.options());
  T* p = static_cast<T*>(target.data());
  parallel_for(0, target.numel(), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {  // a range may start at an odd element
      const auto blk = random_math::block_of(i, seed, offset);
      for (const int64_t pair_end = std::min(e, (i | 1) + 1); i < pair_end; ++i) {
        const auto [w0, w1] = random_math::words_in(blk, i);
        p[i] = f(w0, w1, i);
      }
    }
  });
  if (!target.is_same(dst)) copy(dst, target);
}


void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  dispatch_floating(dst.dtype(), "uniform_", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t w1, int64_t) {
      return random_math::uniform_value<T>(w0, w1, low, high);
    });
  });
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  dispatch_floating(dst.dtype(), "normal_", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t w1, int64_t) {
      return random_math::normal_value<T>(w0, w1, mean, std);
    });
  });
}

void bernoulli(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset) {
  std::vector<double> pv = p.to_vector<double>();
  for (double v : pv)
    LOOM_CHECK(v >= 0 && v <= 1, ValueError, "bernoulli: probabilities must be in [0, 1], got ", v);
  dispatch_all(dst.dtype(), "bernoulli", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t, int64_t i) {
      return T(random_math::bernoulli_value(w0, pv[size_t(i)]) ? 1 : 0);
    });
  });
}

void bernoulli(const Tensor& dst, double p, uint64_t seed, uint64_t offset) {
  LOOM_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli: p must be in [0, 1], got ", p);
  dispatch_all(dst.dtype(), "bernoulli", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t, int64_t) {
      return T(random_math::bernoulli_value(w0, p) ? 1 : 0);
    });
  });
}

void randint(const Tensor& dst, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = uint64_t(high - low);
  dispatch_numeric(dst.dtype(), "randint", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t w1, int64_t) {
      return random_math::randint_value<T>(w0, w1, low, range);
    });
  });
}

}  // namespace

void add_random_kernels(Backend& b) {
  b.uniform = &uniform;
  b.normal = &normal;
  b.bernoulli = &bernoulli;
  b.bernoulli_scalar = &bernoulli;
  b.randint = &randint;
}

}  // namespace loom::kernels::cpu
