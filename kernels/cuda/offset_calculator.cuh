// Where element i of N same-shaped strided tensors lives: the byte offset of each operand
// for a row-major linear index, computed per thread by the CUDA elementwise kernels.
//
// Note [strided indexing on the GPU]
// The operands are first coalesced as on the CPU (Note [strided loops] in
// kernels/cpu/loops.h: size-1 dims dropped, dims contiguous in every operand merged), so a
// contiguous tensor of any rank becomes one dim and a transposed one usually two. The
// calculator keeps the remaining sizes innermost first and peels the linear index apart
// with one division per dim, adding index * byte stride per operand.
// Two flavours: 32-bit (uint32_t index and offsets, the division by a fixed divisor done
// with a multiply-high and a shift) when the element count and every operand's largest
// byte offset fit in 31 bits, which is nearly always; 64-bit (int64_t, plain division)
// otherwise.
//
// Everything here is plain C++ with LOOM_HOST_DEVICE, so the host tests run it too.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/loops.h"

#if defined(__CUDACC__)
#define LOOM_UNROLL _Pragma("unroll")
#else
#define LOOM_UNROLL
#endif

namespace loom::kernels::cuda {

// Dims left after coalescing that a kernel handles; a tensor needing more is refused.
constexpr int kMaxDims = 16;

// A fixed-size array usable in kernel arguments (N >= 1).
template <typename T, int N>
struct Array {
  T v[N];
  LOOM_HOST_DEVICE T& operator[](int i) { return v[i]; }
  LOOM_HOST_DEVICE const T& operator[](int i) const { return v[i]; }
};

template <typename index_t>
struct DivMod {
  index_t div, mod;
};

// Division by a divisor fixed on the host: plain / and % for 64-bit indices.
template <typename index_t>
struct IntDivider {
  IntDivider() = default;
  explicit IntDivider(index_t d) : divisor(d) {}
  LOOM_HOST_DEVICE index_t div(index_t n) const { return n / divisor; }
  LOOM_HOST_DEVICE DivMod<index_t> divmod(index_t n) const {
    const index_t q = div(n);
    return {q, index_t(n - q * divisor)};
  }
  index_t divisor = 1;
};

// 32-bit division by a multiply-high and a shift (Granlund & Montgomery, "Division by
// invariant integers using multiplication", 1994): with s = ceil(log2 d) and
// m = floor(2^32 (2^s - d) / d) + 1, n / d = (mulhi(n, m) + n) >> s for n, d < 2^31
// (the sum then cannot overflow 32 bits).
template <>
struct IntDivider<uint32_t> {
  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    LOOM_ASSERT(d >= 1 && d <= uint32_t(std::numeric_limits<int32_t>::max()), "IntDivider: divisor ", d,
                " out of range");
    shift = 0;
    while ((uint64_t(1) << shift) < d) ++shift;
    const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1;
    magic = uint32_t(m);
  }
  LOOM_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = uint32_t((uint64_t(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
  LOOM_HOST_DEVICE DivMod<uint32_t> divmod(uint32_t n) const {
    const uint32_t q = div(n);
    return {q, n - q * divisor};
  }
  uint32_t divisor = 1;
  uint32_t magic = 1;  // for d = 1: s = 0 and m = 1, so div(n) = (0 + n) >> 0
  uint32_t shift = 0;
};

// Byte offsets of N operands (operand 0 is the output) for a row-major linear index.
template <int N, typename index_t>
struct OffsetCalculator {
  int dims = 0;
  IntDivider<index_t> sizes[kMaxDims];  // innermost dim first
  index_t strides[kMaxDims][N];         // bytes

  LOOM_HOST_DEVICE Array<index_t, N> get(index_t linear) const {
    Array<index_t, N> offsets;
    LOOM_UNROLL
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    LOOM_UNROLL
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == dims) break;
      const DivMod<index_t> qr = sizes[d].divmod(linear);
      linear = qr.div;
      LOOM_UNROLL
      for (int k = 0; k < N; ++k) offsets[k] += qr.mod * strides[d][k];
    }
    return offsets;
  }
};

// ---- host side: from tensors to a calculator ------------------------------------------------

// The coalesced layout of N operands of one shape (operands[0] usually the output).
template <int N>
cpu::StridedLayout<N> coalesced_layout(const std::array<const Tensor*, N>& operands) {
  cpu::StridedLayout<N> layout = cpu::coalesce<N>(operands[0]->sizes(), operands);
  LOOM_CHECK(int(layout.sizes.size()) <= kMaxDims, ValueError, "CUDA kernels: a tensor of shape ",
             shape_str(operands[0]->sizes()), " has ", layout.sizes.size(),
             " dims that cannot be merged; at most ", kMaxDims, " are supported");
  return layout;
}

// True when 32-bit indices and offsets cover the layout: the element count and every
// operand's largest byte offset below 2^31, and no negative stride.
template <int N>
bool fits_in_32_bits(const cpu::StridedLayout<N>& layout) {
  constexpr int64_t limit = std::numeric_limits<int32_t>::max();
  int64_t numel = 1;
  for (int64_t s : layout.sizes) numel *= s;
  if (numel > limit) return false;
  for (int k = 0; k < N; ++k) {
    int64_t max_offset = 0;
    for (size_t d = 0; d < layout.sizes.size(); ++d) {
      const int64_t stride = layout.strides[k][d];
      if (stride < 0) return false;
      // (size - 1) * stride, without overflowing int64 first.
      if (layout.sizes[d] > 1 && stride > (limit - max_offset) / (layout.sizes[d] - 1)) return false;
      max_offset += (layout.sizes[d] - 1) * stride;
    }
  }
  return true;
}

template <int N, typename index_t>
OffsetCalculator<N, index_t> make_offset_calculator(const cpu::StridedLayout<N>& layout) {
  OffsetCalculator<N, index_t> calc;
  calc.dims = int(layout.sizes.size());
  for (int d = 0; d < calc.dims; ++d) {
    const size_t src = layout.sizes.size() - 1 - size_t(d);  // the layout is outermost first
    calc.sizes[d] = IntDivider<index_t>(index_t(layout.sizes[src]));
    for (int k = 0; k < N; ++k) calc.strides[d][k] = index_t(layout.strides[k][src]);
  }
  return calc;
}

}  // namespace loom::kernels::cuda
