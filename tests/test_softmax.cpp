// softmax and log_softmax against a plain loop in double: every dim, dtype and layout, long
// rows (the vectorised path, in parallel), column tiles, the exp's accuracy over its range,
// large, infinite and NaN inputs; the backward kernel against its formula, gradcheck, and
// the error paths.
#include <cmath>
#include <limits>

#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Softmax (log_softmax) of every slice of x along dim, in double, in the element order of
// x.transpose(dim, -1) (each slice contiguous there).
std::vector<double> ref_softmax(const Tensor& x, int64_t dim, bool log) {
  const size_t len = size_t(x.size(dim));
  std::vector<double> v = values(x.transpose(dim, -1));
  for (size_t r = 0; r < v.size(); r += len) {
    double m = -kInf, s = 0;
    for (size_t i = r; i < r + len; ++i) m = std::max(m, v[i]);
    for (size_t i = r; i < r + len; ++i) s += std::exp(v[i] - m);
    for (size_t i = r; i < r + len; ++i) v[i] = log ? v[i] - m - std::log(s) : std::exp(v[i] - m) / s;
  }
  return v;
}

// The input gradient from the output y and its gradient g (kernels/kernels.h's formulas).
std::vector<double> ref_softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log) {
  const size_t len = size_t(y.size(dim));
  const std::vector<double> yv = values(y.transpose(dim, -1)), gv = values(g.transpose(dim, -1));
  std::vector<double> out(yv.size());
  for (size_t r = 0; r < yv.size(); r += len) {
    double s = 0;
    for (size_t i = r; i < r + len; ++i) s += log ? gv[i] : gv[i] * yv[i];
    for (size_t i = r; i < r + len; ++i) out[i] = log ? gv[i] - std::exp(yv[i]) * s : yv[i] * (gv[i] - s);
  }
  return out;
}

// (3, 4, 70) inputs: 70 columns fill one 64-column tile and part of another.
std::vector<std::pair<std::string, Tensor>> softmax_inputs(DType dt) {
  return {
      {"contiguous", random_nonzero({3, 4, 70}, dt, -4, 4)},
      {"permuted", random_nonzero({70, 3, 4}, dt, -4, 4).permute({1, 2, 0})},
      {"sliced", random_nonzero({3, 4, 140}, dt, -4, 4).slice(2, 0, 140, 2)},
      {"expanded", random_nonzero({3, 1, 70}, dt, -4, 4).expand({3, 4, 70})},
  };
}

}  // namespace

TEST_CASE("softmax and log_softmax match a plain loop for every dim, dtype and layout", "[reduce]") {
  for (DType dt : float_dtypes()) {
    for (auto& [layout, x] : softmax_inputs(dt)) {
      for (int64_t dim : {0, 1, 2, -1, -2}) {
        for (bool log : {false, true}) {
          INFO(dtype_name(dt) << " " << layout << " dim " << dim << (log ? " log_softmax" : " softmax"));
          Tensor y = log ? x.log_softmax(dim) : x.softmax(dim);
          CHECK(y.sizes() == x.sizes());
          CHECK(y.dtype() == dt);
          check_close(y.transpose(dim, -1), ref_softmax(x, dim, log), dt);
          Tensor f = log ? loom::log_softmax(x, dim) : loom::softmax(x, dim);
          check_close(f, y);
        }
      }
    }
  }
}

TEST_CASE("softmax over long contiguous rows (the vectorised path, in parallel)", "[reduce]") {
  for (DType dt : float_dtypes()) {
    Tensor x = random_nonzero({64, 4096}, dt, -8, 8);
    for (bool log : {false, true}) {
      INFO(dtype_name(dt) << (log ? " log_softmax" : " softmax"));
      check_close(log ? x.log_softmax(1) : x.softmax(1), ref_softmax(x, 1, log), dt);
      // The same rows as columns: tiles over 4096 columns, parallel over tiles.
      Tensor xt = x.t().contiguous();
      check_close((log ? xt.log_softmax(0) : xt.softmax(0)).t(), ref_softmax(x, 1, log), dt);
    }
  }
}

TEST_CASE("softmax's exp keeps float32 relative accuracy over its whole range", "[reduce]") {
  // Row i is [0, -t_i]: the second probability is exp(-t) / (1 + exp(-t)), down to ~1e-38.
  const int64_t n = 2000;
  Tensor t = linspace(0, 87, n, kFloat64);
  Tensor x = stack({zeros({n}, kFloat64), -t}, 1).to(kFloat32);
  for (bool rows : {true, false}) {
    Tensor y = rows ? x.softmax(1) : x.t().contiguous().softmax(0).t();
    const std::vector<double> p = values(y.select(1, 1)), tv = values(x.select(1, 1));
    for (int64_t i = 0; i < n; ++i) {
      const double e = std::exp(tv[size_t(i)]), ref = e / (1 + e);
      INFO("t = " << -tv[size_t(i)] << (rows ? " (row)" : " (column)"));
      CHECK(std::abs(p[size_t(i)] - ref) <= 2e-6 * ref);
    }
  }
}

TEST_CASE("softmax is stable for large values and follows PyTorch on inf and NaN", "[reduce]") {
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    Tensor big = tensor<double>({1000, 1001, 999, 1000}, {2, 2}).to(dt);
    check_close(big.softmax(1), ref_softmax(big, 1, false), dt);
    check_close(big.log_softmax(0).t(), ref_softmax(big, 0, true), dt);
    // -inf entries (a mask) get probability 0; a fully masked row is NaN, as in PyTorch.
    Tensor masked = tensor<double>({-kInf, 1, 2, -kInf, -kInf, -kInf}, {2, 3}).to(dt);
    std::vector<double> p = masked.softmax(1).to_vector<double>();
    CHECK(p[0] == 0);
    CHECK(p[1] + p[2] == Approx(1).epsilon(1e-2));
    for (size_t i = 3; i < 6; ++i) CHECK(std::isnan(p[i]));
    CHECK(masked.log_softmax(1).to_vector<double>()[0] == -kInf);
    // A NaN poisons its own row only.
    Tensor nan_row = tensor<double>({1, std::nan(""), 2, 1, 2, 3}, {2, 3}).to(dt);
    for (bool log : {false, true}) {
      std::vector<double> q = (log ? nan_row.log_softmax(1) : nan_row.softmax(1)).to_vector<double>();
      for (size_t i = 0; i < 3; ++i) CHECK(std::isnan(q[i]));
      for (size_t i = 3; i < 6; ++i) CHECK(std::isfinite(q[i]));
    }
  }
}

TEST_CASE("softmax of a scalar and of empty tensors", "[reduce]") {
  CHECK(scalar_tensor(3.0).softmax(0).item<double>() == 1.0);
  CHECK(scalar_tensor(3.0).log_softmax(-1).item<double>() == 0.0);
  CHECK(zeros({0, 3}).softmax(1).sizes() == Shape{0, 3});
  CHECK(zeros({3, 0}).log_softmax(1).sizes() == Shape{3, 0});
}

TEST_CASE("softmax backward matches its formula for every dim, dtype and layout", "[reduce]") {
  for (DType dt : float_dtypes()) {
    for (auto& [layout, x0] : softmax_inputs(dt)) {
      for (int64_t dim : {0, 1, 2, -1}) {
        for (bool log : {false, true}) {
          INFO(dtype_name(dt) << " " << layout << " dim " << dim << (log ? " log_softmax" : " softmax"));
          Tensor x = x0.detach().requires_grad_(true);
          Tensor y = log ? x.log_softmax(dim) : x.softmax(dim);
          // A permuted (non-contiguous) incoming gradient.
          Tensor g = random_nonzero({70, 3, 4}, dt).permute({1, 2, 0});
          y.backward(g);
          REQUIRE(x.grad().defined());
          CHECK(x.grad().dtype() == dt);
          check_close(x.grad().transpose(dim, -1), ref_softmax_backward(y.detach(), g, dim, log), dt);
        }
      }
    }
  }
}

TEST_CASE("softmax and log_softmax pass gradcheck", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  Tensor x3 = leaf({2, 3, 4});
  for (bool log : {false, true}) {
    for (int64_t dim : {0, 1, -1}) {
      auto f = [&](const Tensor& t) { return log ? t.log_softmax(dim) : t.softmax(dim); };
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0].t()); }, {xt}));
      // A broadcast (stride-0) gradient reaches the backward kernel.
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]).sum(0); }, {x}));
    }
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return log ? in[0].log_softmax(1) : in[0].softmax(1); }, {x3}));
  }
}

TEST_CASE("softmax errors: integer input, dim out of range", "[reduce]") {
  Tensor i = zeros({2, 3}, kInt64);
  require_throws_with<DTypeError>([&] { i.softmax(1); }, {"softmax", "int64", "(2, 3)"});
  require_throws_with<DTypeError>([&] { loom::log_softmax(i.to(kInt32), 0); }, {"log_softmax", "int32"});
  require_throws_with<DTypeError>([] { zeros({2}, kBool).softmax(0); }, {"softmax", "bool"});
  Tensor x = zeros({2, 3});
  require_throws_with<IndexError>([&] { x.softmax(2); }, {"softmax", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.log_softmax(-3); }, {"log_softmax", "(2, 3)"});
}
