// The vectorisable exp of the CPU kernels that exponentiate shifted scores (softmax.cpp,
// attention.cpp), and the attribute that compiles their float loops per x86 vector width.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace loom::kernels::cpu {

// exp(x) for x <= 0 (or NaN) as branch-free arithmetic the compiler vectorises; std::exp
// is a scalar libm call. Cephes' expf: x = k ln2 + r with |r| <= ln2 / 2, exp(r) by a
// polynomial (relative error ~1e-7), times 2^k built in the exponent bits. Results below
// FLT_MIN (x < -87.33, -inf included) flush to 0. double uses std::exp.
template <typename M>
inline M exp_nonpositive(M x) {
  if constexpr (!std::is_same_v<M, float>) {
    return std::exp(x);
  } else {
    constexpr float kMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
    constexpr uint32_t kLow = 0xC2AEA8F6u;  // the bits of -87.33f
    // The range check and clamp work on the bits, with masks instead of selects: GCC
    // does not if-convert float selects (they could trap), which would keep the loop scalar.
    const uint32_t b = std::bit_cast<uint32_t>(x);
    const uint32_t low = 0u - uint32_t((b > kLow) & (b <= 0xFF800000u));  // -inf <= x < -87.33
    const float xc = std::bit_cast<float>((b & ~low) | (kLow & low));
    const float t = xc * 1.44269504088896341f + kMagic;
    const float k = t - kMagic;  // round(x / ln2)
    const float r = (xc - k * 0.693359375f) - k * -2.12194440e-4f;  // ln2 in two parts
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // t's low mantissa bits hold k; 2^k is (k + 127) << 23. A NaN x stays NaN through p.
    const uint32_t scale = (std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kMagic) + 127u) << 23;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(p * std::bit_cast<float>(scale)) & ~low);
  }
}

}  // namespace loom::kernels::cpu

// The float kernels are compiled for AVX-512, AVX2 and baseline x86-64, and the best for
// the CPU is picked at load time (GCC's function multi-versioning, an ifunc: glibc only;
// flatten inlines the loops into each clone): the polynomial exp is compute-bound at
// baseline SSE width. Other compilers and platforms build the baseline only.
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)
#define LOOM_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#else
#define LOOM_CPU_CLONES
#endif
