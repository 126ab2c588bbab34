// The per-element formulas of the random fills (kernels::uniform, normal, bernoulli,
// randint), shared by the CPU loops (kernels/cpu/random.cpp) and the CUDA kernels
// (kernels/cuda/random.cu) so both produce the same numbers for the same seed and offset.
//
// Element i takes words 2i and 2i+1 of the Philox stream that starts at block `offset`
// (Note [random numbers] in core/generator.h): elements 2j and 2j+1 share block offset+j.
//
// Sameness needs care in two places:
// - a * b + c must round twice on both sides. nvcc fuses it into one FMA by default and a
//   host compiler may too (-march=native with FMA), so the sums below go through
//   mul_add_unfused.
// - normal() calls log and cos, which are not correctly rounded in either libm: CUDA's
//   double log/cos may differ from glibc's by an ulp. Rounded to float32 or a 16-bit
//   float the results agree (barring an ulp landing on a rounding boundary, about one
//   element in 10^8); in float64 they agree to about 1e-15 relative.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "core/generator.h"
#include "core/half.h"

namespace loom::kernels::random_math {

// a * b + c with the product rounded before the sum (never one fused multiply-add).
LOOM_HOST_DEVICE inline float mul_add_unfused(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(__fmul_rn(a, b), c);
#else
  volatile float p = a * b;  // a value read back from memory cannot be fused
  return p + c;
#endif
}
LOOM_HOST_DEVICE inline double mul_add_unfused(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  volatile double p = a * b;
  return p + c;
#endif
}

// Elements 2m and 2m + 1 draw from one Philox block, offset + m: element i's block, and
// its two words in it (words 0 and 1 for the even element, 2 and 3 for the odd one). A loop
// over elements computes the block once for both (kernels/cpu/random.cpp).
LOOM_HOST_DEVICE inline std::array<uint32_t, 4> block_of(int64_t i, uint64_t seed, uint64_t offset) {
  return Philox::block(seed, offset + uint64_t(i) / 2);
}
LOOM_HOST_DEVICE inline std::pair<uint32_t, uint32_t> words_in(const std::array<uint32_t, 4>& blk, int64_t i) {
  const int first = int(i % 2) * 2;
  return {blk[first], blk[first + 1]};
}

// The two random words of element i.
LOOM_HOST_DEVICE inline std::pair<uint32_t, uint32_t> words_of(int64_t i, uint64_t seed, uint64_t offset) {
  return words_in(block_of(i, seed, offset), i);
}

// U[low, high) in T.
template <typename T>
LOOM_HOST_DEVICE inline T uniform_value(uint32_t w0, uint32_t w1, double low, double high) {
  if constexpr (std::is_same_v<T, double>) {
    return mul_add_unfused(high - low, Philox::to_unit_double(w0, w1), low);
  } else {
    // As many random bits as T's significand holds (as PyTorch), so that rounding to a
    // 16-bit float cannot carry x up to 1 and the result up to `high`.
    constexpr int bits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
    const float x = float(w0 >> (32 - bits)) * (1.0f / float(1u << bits));
    return T(mul_add_unfused(float(high - low), x, float(low)));
  }
}

// N(mean, std^2) in T, by Box-Muller on the two words; u1 in (0, 1] keeps the log finite.
template <typename T>
LOOM_HOST_DEVICE inline T normal_value(uint32_t w0, uint32_t w1, double mean, double std) {
  const double u1 = (double(w0) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = double(w1) * (1.0 / 4294967296.0);
  const double radius = std * std::sqrt(-2.0 * std::log(u1));
  return T(mul_add_unfused(radius, std::cos(6.283185307179586 * u2), mean));
}

// 1 with probability p: the first word as a float in [0, 1) against p.
LOOM_HOST_DEVICE inline bool bernoulli_value(uint32_t w0, double p) {
  return double(Philox::to_unit_float(w0)) < p;
}

// Uniform in [low, low + range) from both words (range = high - low > 0).
template <typename T>
LOOM_HOST_DEVICE inline T randint_value(uint32_t w0, uint32_t w1, int64_t low, uint64_t range) {
  return T(low + int64_t(((uint64_t(w1) << 32) | w0) % range));
}

}  // namespace loom::kernels::random_math
