// CPU random fills from Philox (Note [random numbers] in core/generator.h): element i
// uses words 2i and 2i+1 of the stream that starts at block `offset` (four words a
// block), so any split of the work gives the same numbers, and so will CUDA kernels.
#include <cmath>

#include "core/factories.h"
#include "kernels/cpu/loops.h"
#include "kernels/kernels.h"

namespace loom::kernels {
namespace {

// The two random words of element i.
inline std::pair<uint32_t, uint32_t> words_of(int64_t i, uint64_t seed, uint64_t offset) {
  const uint64_t word = uint64_t(i) * 2;
  auto blk = Philox::block(seed, offset + word / 4);
  return {blk[word % 4], blk[word % 4 + 1]};
}

// dst[i] = f(w0, w1, i) in row-major element order.
template <typename T, typename F>
void fill_random(const Tensor& dst, uint64_t seed, uint64_t offset, F f) {
  cpu::check_cpu(dst, "random");
  Tensor target = dst.is_contiguous() ? dst : empty(dst.sizes(), dst.options());
  T* p = static_cast<T*>(target.data());
  parallel_for(0, target.numel(), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto [w0, w1] = words_of(i, seed, offset);
      p[i] = f(w0, w1, i);
    }
  });
  if (!target.is_same(dst)) copy(dst, target);
}

}  // namespace

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  dispatch_floating(dst.dtype(), "uniform_", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t w1, int64_t) {
      if constexpr (std::is_same_v<T, double>) {
        return low + (high - low) * Philox::to_unit_double(w0, w1);
      } else {
        // As many random bits as T's significand holds (as PyTorch), so that rounding to a
        // 16-bit float cannot carry x up to 1 and the result up to `high`.
        constexpr int bits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
        const float x = float(w0 >> (32 - bits)) * (1.0f / float(1u << bits));
        return T(float(low) + float(high - low) * x);
      }
    });
  });
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  dispatch_floating(dst.dtype(), "normal_", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t w1, int64_t) {
      // Box-Muller; u1 in (0, 1] keeps the log finite.
      double u1 = (double(w0) + 1.0) * (1.0 / 4294967296.0);
      double u2 = double(w1) * (1.0 / 4294967296.0);
      return T(mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    });
  });
}

void bernoulli(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset) {
  std::vector<double> pv = p.to_vector<double>();
  for (double v : pv)
    LOOM_CHECK(v >= 0 && v <= 1, ValueError, "bernoulli: probabilities must be in [0, 1], got ", v);
  dispatch_all(dst.dtype(), "bernoulli", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t, int64_t i) {
      return T(Philox::to_unit_float(w0) < pv[size_t(i)] ? 1 : 0);
    });
  });
}

void randint(const Tensor& dst, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = uint64_t(high - low);
  dispatch_numeric(dst.dtype(), "randint", [&]<typename T>() {
    fill_random<T>(dst, seed, offset, [&](uint32_t w0, uint32_t w1, int64_t) {
      return T(low + int64_t(((uint64_t(w1) << 32) | w0) % range));
    });
  });
}

}  // namespace loom::kernels
