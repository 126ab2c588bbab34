// Reading one element of a bfloat16-GEMM operand (gemm_bf16.h) as bfloat16 bits. Included
// by gemm_bf16.cpp and gemm_bf16_avx512bf16.cpp, each getting its own internal copy (the
// second is compiled for AVX-512; Note [GEMM dispatch]).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm_bf16.h"

namespace loom::kernels::cpu {
namespace {  // internal linkage: each including file gets its own copy

// float -> bfloat16 bits, rounding to nearest even; a NaN stays a (quiet) NaN.
inline uint16_t round_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Element (i, j) of the operand, as bfloat16 bits.
inline uint16_t operand_bits(const Bf16Operand& op, int64_t i, int64_t j) {
  const int64_t at = op.m.col_major ? i + j * op.m.ld : i * op.m.ld + j;
  if (op.dtype == DType::BFloat16) return static_cast<const uint16_t*>(op.m.data)[at];
  return round_to_bf16(static_cast<const float*>(op.m.data)[at]);
}

}  // namespace
}  // namespace loom::kernels::cpu
