// 16-bit floating-point storage types: IEEE binary16 (Half) and bfloat16 (BFloat16).
//
// Both are storage formats: arithmetic converts to float (see OpMath in dtype.h), so a
// kernel written for float works for them unchanged. Conversions round to nearest even,
// as CUDA's __float2half_rn / __float2bfloat16_rn do, so CPU and GPU results agree.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom {

namespace detail {
LOOM_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
LOOM_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  LOOM_HOST_DEVICE BFloat16(float f) : bits(round(f)) {}  // NOLINT: implicit like float
  LOOM_HOST_DEVICE operator float() const { return detail::bits_float(uint32_t(bits) << 16); }
  LOOM_HOST_DEVICE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }

 private:
  LOOM_HOST_DEVICE static uint16_t round(float f) {
    uint32_t u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;  // round to nearest even
    return uint16_t(u >> 16);
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  LOOM_HOST_DEVICE Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like float
  LOOM_HOST_DEVICE operator float() const { return to_float(bits); }
  LOOM_HOST_DEVICE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }

 private:
  LOOM_HOST_DEVICE static uint16_t from_float(float f) {
    uint32_t x = detail::float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // Inf or NaN
      return uint16_t(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflows to Inf
    if (absx < 0x38800000u) {                                  // subnormal or zero in half
      // Add a magic number so the FPU does the round-to-nearest-even shift for us.
      float magic = detail::bits_float(0x3f000000u);  // 0.5
      float v = detail::bits_float(absx) + magic;
      return uint16_t(sign | (detail::float_bits(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return uint16_t(sign | (absx >> 13));
  }
  LOOM_HOST_DEVICE static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      if (mant == 0) return detail::bits_float(sign);
      float v = float(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -v : v;
    }
    if (exp == 31) return detail::bits_float(sign | 0x7f800000u | (mant << 13));
    return detail::bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

inline std::ostream& operator<<(std::ostream& os, Half h) { return os << float(h); }
inline std::ostream& operator<<(std::ostream& os, BFloat16 h) { return os << float(h); }

}  // namespace loom
