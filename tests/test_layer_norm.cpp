// nn::functional::layer_norm's fused CPU kernels (Note [fused layer norm]) against the plain
// composition of ops (detail::layer_norm_reference) in float64, float32 and the 16-bit
// types, float64 gradcheck, and the argument checks.
#include "catch2_compat.h"

#include <cmath>
#include <sstream>

#include "autograd/gradcheck.h"
#include "loom.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

struct LayerNormCase {
  Shape x_shape, normalized;
  bool weight, bias;
  bool permuted = false;  // x a non-contiguous view
};

std::string describe(const LayerNormCase& c) {
  std::ostringstream os;
  os << "x " << shape_str(c.x_shape) << " over " << shape_str(c.normalized) << (c.weight ? " weight" : "")
     << (c.bias ? " bias" : "") << (c.permuted ? " permuted" : "");
  return os.str();
}

struct Outcome {
  Tensor y, dx, dw, db;
};

// y = layer_norm(x, w, b) through `norm` and the gradients of sum(y * gy).
template <typename Fn>
Outcome run(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& gy, Fn&& norm) {
  auto leaf_of = [](const Tensor& t) { return t.defined() ? t.detach().requires_grad_(true) : t; };
  Tensor x = leaf_of(x0), w = leaf_of(w0), b = leaf_of(b0);
  Tensor y = norm(x, w, b);
  (y.to(kFloat64) * gy).sum().backward();
  return {y.detach(), x.grad(), w.defined() ? w.grad() : Tensor(), b.defined() ? b.grad() : Tensor()};
}

bool ran_fused(const Tensor& y) { return y.grad_fn() && y.grad_fn()->name() == "NativeLayerNormBackward"; }

// |actual - expected| <= atol + rtol |expected| everywhere (NaN nowhere).
void require_close(const Tensor& actual, const Tensor& expected, double atol, double rtol, const std::string& what) {
  INFO(what);
  REQUIRE(actual.defined() == expected.defined());
  if (!actual.defined()) return;
  REQUIRE(actual.sizes() == expected.sizes());
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": got " << a[i] << ", expected " << e[i]);
    REQUIRE(std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]));
  }
}

// The fused path on x in dtype (weight and bias in w_dtype) against the float64 composition
// on the same values: float64 to 1e-12, float32 to 1e-5, 16-bit to the dtype's tolerance of
// the suite (the output rounded once, the gradients once).
void check_case(const LayerNormCase& c, DType dtype, DType w_dtype) {
  INFO(describe(c) << " in " << dtype_name(dtype) << ", weight in " << dtype_name(w_dtype));
  Tensor x = random_nonzero(c.x_shape, kFloat64) * 3 + 0.5;  // an offset: the mean is not 0
  if (c.permuted) x = x.transpose(0, -1).contiguous().transpose(0, -1);
  x = x.to(dtype);
  const Tensor w = c.weight ? random_nonzero(c.normalized, w_dtype) : Tensor();
  const Tensor b = c.bias ? random_nonzero(c.normalized, w_dtype) : Tensor();
  // gy through dtype: y's gradient reaches the kernel in y's dtype
  const Tensor gy = random_nonzero(c.x_shape, kFloat64).to(dtype).to(kFloat64);
  const Outcome fused = run(x, w, b, gy, [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
    Tensor y = F::layer_norm(xx, c.normalized, ww, bb);
    REQUIRE(ran_fused(y));
    CHECK(y.dtype() == dtype);
    return y;
  });
  auto f64 = [](const Tensor& t) { return t.defined() ? t.to(kFloat64) : t; };
  const Outcome ref = run(f64(x), f64(w), f64(b), gy, [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
    return F::detail::layer_norm_reference(xx, c.normalized, ww, bb, 1e-5);
  });
  if (c.weight) CHECK(fused.dw.dtype() == w_dtype);
  if (c.bias) CHECK(fused.db.dtype() == w_dtype);
  CHECK(fused.dx.dtype() == dtype);
  const Tolerance t = dtype == kFloat64 ? Tolerance{1e-12, 1e-12} : tolerance(dtype);
  // The weight and bias gradients sum over every row: float32 sums of many rows round more.
  const double sums = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-4 : t.rtol;
  require_close(f64(fused.y), ref.y, t.atol, t.rtol, "y");
  // dx is rstd times a difference that cancels (to 0 for one element per row): its absolute
  // error scales with the largest rstd = 1 / sqrt(var + eps).
  const Tensor centered = f64(x) - f64(x).mean(Dims{-1}, true);
  const double rstd_max =
      c.x_shape[0] == 0 ? 1 : ((centered * centered).mean(Dims{-1}, true) + 1e-5).rsqrt().max().item<double>();
  require_close(f64(fused.dx), ref.dx, t.atol * std::max(1.0, rstd_max), t.rtol, "dx");
  require_close(f64(fused.dw), ref.dw, sums, sums, "dweight");
  require_close(f64(fused.db), ref.db, sums, sums, "dbias");
}

const std::vector<LayerNormCase>& cases() {
  static const std::vector<LayerNormCase> all = {
      {{3, 5, 7}, {7}, true, true},
      {{3, 5, 7}, {5, 7}, true, true},
      {{4, 6}, {6}, false, false},
      {{4, 6}, {6}, true, false},
      {{4, 6}, {6}, false, true},
      {{6, 9, 10}, {10}, true, true, true},  // a non-contiguous x
      {{5, 1}, {1}, true, true},            // one element per row: every xhat is 0
      {{3, 1000}, {1000}, true, true},      // rows longer than a vector register many times
      {{2100, 33}, {33}, true, true},       // many rows: several chunks of partial sums
      {{0, 8}, {8}, true, true},            // no rows
  };
  return all;
}

}  // namespace

TEST_CASE("layer_norm fused kernel matches the composition of ops in float64 and float32", "[nn][layer_norm]") {
  manual_seed(31);
  for (DType dtype : {kFloat64, kFloat32})
    for (const LayerNormCase& c : cases()) check_case(c, dtype, dtype);
}

TEST_CASE("layer_norm fused kernel takes 16-bit inputs with 16-bit or float32 weights", "[nn][layer_norm]") {
  manual_seed(32);
  for (DType dtype : {kBFloat16, kFloat16})
    for (DType w_dtype : {dtype, kFloat32})
      for (const LayerNormCase& c : cases()) check_case(c, dtype, w_dtype);
}

TEST_CASE("layer_norm fused backward passes float64 gradcheck", "[nn][layer_norm]") {
  manual_seed(33);
  const Tensor w = leaf({3, 4}), b = leaf({3, 4});
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {3, 4}, in[1], in[2]); },
                  {leaf({2, 3, 4}) * 2 + 1, w, b}));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0].transpose(0, 1), {5}); },
                  {leaf({5, 3})}));
}

TEST_CASE("layer_norm under CPU bf16 autocast runs the fused kernel in the input's dtype", "[nn][layer_norm][amp]") {
  manual_seed(34);
  nn::LayerNorm norm(nn::LayerNormOptions({16}));
  const Tensor x = randn({4, 16}).to(kBFloat16);
  amp::AutocastGuard autocast(kCPU, kBFloat16);
  const Tensor y = norm(x);
  CHECK(ran_fused(y));
  CHECK(y.dtype() == kBFloat16);  // as PyTorch 2.x's CPU autocast, which leaves layer_norm alone
  y.to(kFloat32).sum().backward();
  CHECK(norm->weight.grad().dtype() == kFloat32);
}

TEST_CASE("layer_norm rejects a weight or bias not of normalized_shape", "[nn][layer_norm]") {
  const Tensor x = randn({2, 3, 4});
  require_throws_with<ShapeError>([&] { F::layer_norm(x, {3, 4}, randn({4})); },
                                  {"layer_norm", "weight of shape (4,)", "normalized_shape (3, 4)"});
  require_throws_with<ShapeError>([&] { F::layer_norm(x, {4}, randn({4}), randn({1, 4})); },
                                  {"layer_norm", "bias of shape (1, 4)", "normalized_shape (4,)"});
  require_throws_with<ShapeError>([&] { F::layer_norm(x, {3}); }, {"layer_norm", "does not end in normalized_shape"});
}
