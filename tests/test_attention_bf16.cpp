// The fused CPU attention on bfloat16 operands (Note [16-bit attention on the CPU]): every
// tile product on the bfloat16 GEMM, each of its kernels forced (kernels/cpu/gemm_bf16.h),
// against the float64 composition of ops on the same bfloat16 values.
#include "catch2_compat.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "bf16_kernel_test_util.h"
#include "loom.h"
#include "attention_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;
using kernels::cpu::Bf16GemmKernel;

namespace {

struct Bf16Case {
  int64_t B, H, L, S, E, Ev;
  enum { None, Causal, FloatMask, BoolMask } mask;
};

std::string describe(const Bf16Case& c) {
  std::ostringstream os;
  os << "(B " << c.B << ", H " << c.H << ") L " << c.L << " S " << c.S << " E " << c.E << " Ev " << c.Ev << " mask "
     << int(c.mask);
  return os.str();
}

// The attention mask of a case: none, an additive (L, S) bfloat16 mask with -inf where
// masked, or a boolean (B, 1, 1, S) padding mask; every row keeps its first key.
Tensor make_mask(const Bf16Case& c) {
  if (c.mask == Bf16Case::None || c.mask == Bf16Case::Causal) return Tensor();
  const Shape shape = c.mask == Bf16Case::FloatMask ? Shape{c.L, c.S} : Shape{c.B, 1, 1, c.S};
  Tensor keep = rand(shape).lt(0.75);
  keep.select(-1, 0).fill_(true);
  if (c.mask == Bf16Case::BoolMask) return keep;
  const double inf = std::numeric_limits<double>::infinity();
  return random_nonzero(shape, kBFloat16, -1, 1).masked_fill(keep.logical_not(), -inf);
}

// |actual - expected| <= tol (1 + |expected|) everywhere, NaN nowhere; on failure the worst element.
void check_within(const Tensor& actual, const Tensor& expected, double tol, const std::string& what) {
  REQUIRE(actual.sizes() == expected.sizes());
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double excess = std::isnan(a[i]) ? INFINITY : std::abs(a[i] - e[i]) - tol * (1 + std::abs(e[i]));
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  INFO(what << " element " << worst << ": got " << a[worst] << ", expected " << e[worst]);
  CHECK(worst_excess <= 0);
}


// The fused kernel on bfloat16 q, k, v against the float64 composition on the same values.
// Tolerance: the kernel rounds the weights p and the score gradients ds to bfloat16 for its
// GEMMs (2^-9 relative each) and each output once more (2^-9): 1.6e-2 of (1 + |expected|).
SdpaGrads check_bf16_case(const Bf16Case& c) {
  INFO(describe(c));
  const Tensor q = random_nonzero({c.B, c.H, c.L, c.E}, kBFloat16), k = random_nonzero({c.B, c.H, c.S, c.E}, kBFloat16);
  const Tensor v = random_nonzero({c.B, c.H, c.S, c.Ev}, kBFloat16);
  const Tensor gy = random_nonzero({c.B, c.H, c.L, c.Ev}, kBFloat16);
  const Tensor mask = make_mask(c);
  const bool causal = c.mask == Bf16Case::Causal;
  const SdpaGrads fused = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return F::scaled_dot_product_attention(a, b, d, mask, 0.0, causal);
  });
  auto f64 = [](const Tensor& t) { return t.defined() && t.dtype() != kBool ? t.to(kFloat64) : t; };
  const SdpaGrads ref =
      sdpa_grads(f64(q), f64(k), f64(v), f64(gy), [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return F::detail::sdpa_reference(a, b, d, f64(mask), 0.0, causal, std::nullopt);
  });
  for (const Tensor* t : {&fused.out, &fused.dq, &fused.dk, &fused.dv}) CHECK(t->dtype() == kBFloat16);
  check_within(fused.out, ref.out, 1.6e-2, "out");
  check_within(fused.dq, ref.dq, 1.6e-2, "dq");
  check_within(fused.dk, ref.dk, 1.6e-2, "dk");
  check_within(fused.dv, ref.dv, 1.6e-2, "dv");
  return fused;
}

const std::vector<Bf16Case>& bf16_cases() {
  static const std::vector<Bf16Case> cases = {
      {2, 2, 37, 133, 16, 9, Bf16Case::None},
      {1, 2, 300, 520, 64, 64, Bf16Case::None},      // several tiles of rows and keys, partial last ones
      {2, 1, 290, 290, 33, 17, Bf16Case::Causal},    // odd E and Ev: a k-pair half padded
      {2, 2, 40, 70, 16, 8, Bf16Case::FloatMask},
      {3, 2, 21, 300, 8, 5, Bf16Case::BoolMask},     // a broadcast padding mask
      {1, 1, 1, 1, 1, 1, Bf16Case::None},
  };
  return cases;
}

}  // namespace

TEST_CASE("sdpa bfloat16 tiles on the float32 fallback of the bfloat16 GEMM", "[attention]") {
  manual_seed(21);
  ForcedBf16Kernel forced(Bf16GemmKernel::Float32);
  for (const Bf16Case& c : bf16_cases()) check_bf16_case(c);
}

TEST_CASE("sdpa bfloat16 tiles on the avx512_bf16 kernel", "[.avx512bf16]") {
  skip_without_avx512_bf16();
  for (const Bf16Case& c : bf16_cases()) {
    // Both kernels round the same operands once and differ only in the order of float32
    // sums: their bfloat16 results are at most one rounding step (2^-8 relative) apart.
    manual_seed(22);
    SdpaGrads fallback;
    {
      ForcedBf16Kernel forced(Bf16GemmKernel::Float32);
      fallback = check_bf16_case(c);
    }
    manual_seed(22);
    ForcedBf16Kernel forced(Bf16GemmKernel::Avx512Bf16);
    const SdpaGrads avx = check_bf16_case(c);
    INFO(describe(c));
    check_within(avx.out, fallback.out, 4e-3, "out, avx512_bf16 against float32");
    check_within(avx.dq, fallback.dq, 4e-3, "dq, avx512_bf16 against float32");
    check_within(avx.dk, fallback.dk, 4e-3, "dk, avx512_bf16 against float32");
    check_within(avx.dv, fallback.dv, 4e-3, "dv, avx512_bf16 against float32");
  }
}
