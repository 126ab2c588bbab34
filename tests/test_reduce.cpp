// Reductions against plain-loop references in double: sum, mean, max/min (all elements and
// along a dim, with indices), argmax/argmin, var/std, logsumexp, norm and cumsum, over
// every dim set, keepdim, dtype and memory layout; their gradients (gradcheck, tie rules,
// zero norms) and error paths.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A (3, 4, 5) tensor in several memory layouts.
std::vector<std::pair<std::string, Tensor>> layouts(DType dt, double low = -2, double high = 2) {
  return {
      {"contiguous", random_nonzero({3, 4, 5}, dt, low, high)},
      {"transposed", random_nonzero({5, 4, 3}, dt, low, high).transpose(0, 2)},
      {"sliced", random_nonzero({3, 8, 5}, dt, low, high).slice(1, 1, 8, 2)},
      {"expanded", random_nonzero({3, 1, 5}, dt, low, high).expand({3, 4, 5})},
  };
}

// Dims as passed to the op (negative, unsorted, empty = all) and the same dims sorted in
// [0, 3), for the (3, 4, 5) inputs above.
const std::vector<std::pair<Dims, Dims>> kDimCases{
    {{}, {0, 1, 2}}, {{0}, {0}},       {{1}, {1}},         {{-1}, {2}},
    {{2, 0}, {0, 2}}, {{-1, -3}, {0, 2}}, {{1, 2}, {1, 2}}, {{0, 1, 2}, {0, 1, 2}},
};

// x viewed with the kept dims first and `dims` (sorted) last.
Tensor moved_last(const Tensor& x, const Dims& dims) {
  Dims order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
  order.insert(order.end(), dims.begin(), dims.end());
  return x.permute(order);
}

// The values each output element reduces, in row-major order of the kept dims.
std::vector<std::vector<double>> rows_of(const Tensor& x, const Dims& dims) {
  int64_t len = 1;
  for (int64_t d : dims) len *= x.size(d);
  const std::vector<double> v = values(moved_last(x, dims));
  std::vector<std::vector<double>> rows(size_t(x.numel() / std::max<int64_t>(len, 1)));
  for (size_t r = 0; r < rows.size(); ++r)
    rows[r].assign(v.begin() + int64_t(r) * len, v.begin() + int64_t(r + 1) * len);
  return rows;
}

template <typename F>
std::vector<double> reduce_rows(const Tensor& x, const Dims& dims, F f) {
  std::vector<double> out;
  for (const std::vector<double>& row : rows_of(x, dims)) out.push_back(f(row));
  return out;
}

Shape expected_shape(const Shape& s, const Dims& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(s[size_t(d)]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

double ref_sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double ref_mean(const std::vector<double>& v) { return ref_sum(v) / double(v.size()); }
double ref_var(const std::vector<double>& v, int64_t correction) {
  const double m = ref_mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / double(std::max<int64_t>(int64_t(v.size()) - correction, 0));
}
double ref_logsumexp(const std::vector<double>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}
double ref_norm(const std::vector<double>& v, double p) {
  if (std::isinf(p)) {
    double best = std::abs(v[0]);
    for (double x : v) best = p > 0 ? std::max(best, std::abs(x)) : std::min(best, std::abs(x));
    return best;
  }
  double s = 0;
  for (double x : v) s += p == 0 ? double(x != 0) : std::pow(std::abs(x), p);
  return p == 0 ? s : std::pow(s, 1 / p);
}
// First index of the max (min) of v.
int64_t ref_arg(const std::vector<double>& v, bool is_max) {
  int64_t best = 0;
  for (int64_t i = 1; i < int64_t(v.size()); ++i)
    if (is_max ? v[size_t(i)] > v[size_t(best)] : v[size_t(i)] < v[size_t(best)]) best = i;
  return best;
}

std::vector<DType> numeric_dtypes() {
  std::vector<DType> v = float_dtypes();
  v.insert(v.end(), {kInt64, kInt32});
  return v;
}

}  // namespace

// ---- sum and mean ------------------------------------------------------------------------

TEST_CASE("sum and mean match a plain loop over any dims, keepdim, dtype and layout", "[reduce]") {
  // Positive values: a sum near zero would measure cancellation, not the kernel.
  for (DType dt : numeric_dtypes()) {
    for (auto& [layout, x] : layouts(dt, 0.1, 2)) {
      for (auto& [dims, sorted] : kDimCases) {
        for (bool keepdim : {false, true}) {
          INFO(dtype_name(dt) << " " << layout << " dims " << shape_str(dims) << " keepdim " << keepdim);
          Tensor s = x.sum(dims, keepdim);
          CHECK(s.sizes() == expected_shape(x.sizes(), sorted, keepdim));
          CHECK(s.dtype() == (is_floating_point(dt) ? dt : kInt64));
          check_close(s, reduce_rows(x, sorted, ref_sum), dt, "sum");
          if (is_floating_point(dt)) {
            Tensor m = x.mean(dims, keepdim);
            CHECK(m.sizes() == expected_shape(x.sizes(), sorted, keepdim));
            check_close(m, reduce_rows(x, sorted, ref_mean), dt, "mean");
          }
        }
      }
    }
    Tensor x = random_nonzero({3, 4, 5}, dt, 0.1, 2);
    CHECK(x.sum().dim() == 0);
    check_close(x.sum(), {ref_sum(values(x))}, dt, "sum()");
    check_close(x.sum(-2), reduce_rows(x, {1}, ref_sum), dt, "sum(-2)");
    if (is_floating_point(dt)) check_close(x.mean(), {ref_mean(values(x))}, dt, "mean()");
  }
}

TEST_CASE("sum of bool counts in int64, and mean of an integer tensor is a DTypeError", "[reduce]") {
  Tensor b = rand({6, 7}) > 0.5;
  Tensor s = b.sum(1);
  CHECK(s.dtype() == kInt64);
  check_close(s, reduce_rows(b, {1}, ref_sum), kInt64);
  require_throws_with<DTypeError>([] { zeros({2, 3}, kInt64).mean(); }, {"mean", "int64"});
}

TEST_CASE("sum and mean of large tensors (parallel paths) and of empty dims", "[reduce]") {
  Tensor x = random_nonzero({64, 2048}, kFloat32, 0.1, 2);
  check_close(x.sum(1), reduce_rows(x, {1}, ref_sum), kFloat32, "rows");
  check_close(x.sum(0), reduce_rows(x, {0}, ref_sum), kFloat32, "columns");
  check_close(x.t().mean(0), reduce_rows(x, {1}, ref_mean), kFloat32, "transposed");
  Tensor e = zeros({0, 3});
  CHECK(e.sum(0).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(e.sum(1).sizes() == Shape{0});
}

TEST_CASE("sum and mean pass gradcheck, also on non-contiguous inputs", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  for (const Dims& dims : std::vector<Dims>{{}, {0}, {-1}, {0, 1}}) {
    for (bool keepdim : {false, true}) {
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].sum(dims, keepdim); }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].mean(dims, keepdim); }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().mean(dims, keepdim); }, {xt}));
    }
  }
}

// ---- max, min, argmax, argmin ------------------------------------------------------------

TEST_CASE("max and min of all elements match a plain loop", "[reduce]") {
  for (DType dt : numeric_dtypes()) {
    for (auto& [layout, x] : layouts(dt, -5, 5)) {
      INFO(dtype_name(dt) << " " << layout);
      const std::vector<double> v = values(x);
      Tensor mx = x.max(), mn = x.min();
      CHECK(mx.dim() == 0);
      CHECK(mx.dtype() == dt);
      CHECK(mx.item<double>() == *std::max_element(v.begin(), v.end()));
      CHECK(mn.item<double>() == *std::min_element(v.begin(), v.end()));
      CHECK(x.argmax().item<int64_t>() == ref_arg(v, true));
      CHECK(x.argmin().item<int64_t>() == ref_arg(v, false));
    }
  }
  Tensor b = tensor<bool>({false, true, false});
  CHECK(b.max().dtype() == kBool);
  CHECK(b.max().item<bool>());
  CHECK_FALSE(b.min().item<bool>());
  CHECK(scalar_tensor(2.5).max().item<double>() == 2.5);
  CHECK(scalar_tensor(2.5).argmax().item<int64_t>() == 0);
}

TEST_CASE("max and min along a dim match a plain loop: values, first index on ties", "[reduce]") {
  // Small integer ranges make ties frequent, so the first-index rule is exercised.
  for (DType dt : numeric_dtypes()) {
    for (auto& [layout, x] : layouts(dt, -3, 3)) {
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        const int64_t d = dim < 0 ? dim + 3 : dim;
        for (bool keepdim : {false, true}) {
          INFO(dtype_name(dt) << " " << layout << " dim " << dim << " keepdim " << keepdim);
          const Shape shape = expected_shape(x.sizes(), {d}, keepdim);
          for (bool is_max : {true, false}) {
            auto [v, i] = is_max ? x.max(dim, keepdim) : x.min(dim, keepdim);
            CHECK(v.sizes() == shape);
            CHECK(i.sizes() == shape);
            CHECK(i.dtype() == kInt64);
            std::vector<double> ref_v;
            std::vector<int64_t> ref_i;
            for (const std::vector<double>& row : rows_of(x, {d})) {
              ref_i.push_back(ref_arg(row, is_max));
              ref_v.push_back(row[size_t(ref_i.back())]);
            }
            check_close(v, ref_v, dt, is_max ? "max values" : "min values");
            CHECK(i.to_vector<int64_t>() == ref_i);
            Tensor a = is_max ? x.argmax(dim, keepdim) : x.argmin(dim, keepdim);
            CHECK(a.sizes() == shape);
            CHECK(a.to_vector<int64_t>() == ref_i);
          }
        }
      }
    }
  }
}

TEST_CASE("max and min along a dim of large tensors (column tiles, parallel)", "[reduce]") {
  Tensor x = random_nonzero({64, 2050}, kFloat32);
  for (int64_t dim : {0, 1}) {
    std::vector<double> ref_max;
    std::vector<int64_t> ref_imax, ref_imin;
    for (const std::vector<double>& row : rows_of(x, {dim})) {
      ref_imax.push_back(ref_arg(row, true));
      ref_imin.push_back(ref_arg(row, false));
      ref_max.push_back(row[size_t(ref_imax.back())]);
    }
    auto [v, i] = x.max(dim);
    check_close(v, ref_max, kFloat32);
    CHECK(i.to_vector<int64_t>() == ref_imax);
    CHECK(x.t().argmin(1 - dim).to_vector<int64_t>() == ref_imin);  // the same slices, strided
  }
}

TEST_CASE("max and min propagate NaN: the first NaN wins", "[reduce]") {
  for (DType dt : float_dtypes()) {
    Tensor x = tensor<double>({1, kNaN, 3, kNaN}).to(dt);
    CHECK(std::isnan(x.max().item<double>()));
    CHECK(std::isnan(x.min().item<double>()));
    for (bool is_max : {true, false}) {
      auto [v, i] = is_max ? x.max(0) : x.min(0);
      CHECK(std::isnan(v.item<double>()));
      CHECK(i.item<int64_t>() == 1);
    }
    CHECK(x.argmax().item<int64_t>() == 1);
    CHECK(x.argmin().item<int64_t>() == 1);
    // A NaN after the extremum still wins, in every column.
    Tensor y = tensor<double>({5, 1, kNaN, 2, 0, kNaN}, {3, 2}).to(dt);
    CHECK(y.argmax(0).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  }
}

TEST_CASE("max and min of infinities keep them (all elements, along a dim, argmax)", "[reduce]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    const Tensor lows = tensor<double>({-inf, -inf, -inf}).to(dt), highs = tensor<double>({inf, inf}).to(dt);
    CHECK(lows.max().item<double>() == -inf);
    CHECK(highs.min().item<double>() == inf);
    auto [v, i] = lows.max(0);
    CHECK(v.item<double>() == -inf);
    CHECK(i.item<int64_t>() == 0);
    // Along a dim, also through the column-tile path: every column is all -inf or all +inf.
    const Tensor m = tensor<double>({-inf, inf, -inf, inf, -inf, inf}, {3, 2}).to(dt);
    CHECK(std::get<0>(m.max(0)).to_vector<double>() == std::vector<double>{-inf, inf});
    CHECK(std::get<0>(m.min(0)).to_vector<double>() == std::vector<double>{-inf, inf});
    CHECK(lows.argmax().item<int64_t>() == 0);
  }
}

TEST_CASE("max and min pass gradcheck (all elements and along a dim)", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return in[0].max(); }, {x}));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return in[0].min(); }, {x}));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return in[0].t().max(); }, {xt}));
  for (int64_t dim : {0, 1, -1}) {
    for (bool keepdim : {false, true}) {
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].max(dim, keepdim).first; }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].min(dim, keepdim).first; }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().max(dim, keepdim).first; }, {xt}));
    }
  }
  Tensor s = leaf({});
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return in[0].max(0).first; }, {s}));
}

TEST_CASE("max gradients: ties share evenly for max(), go to the index for max(dim)", "[reduce]") {
  Tensor x = tensor<double>({1, 3, 3, -2}).requires_grad_(true);
  x.max().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0});
  x.mutable_grad() = Tensor();
  x.min().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 1});
  x.mutable_grad() = Tensor();
  x.max(0).first.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0});
  // Indices carry no gradient; argmax is not differentiable.
  CHECK_FALSE(x.max(0).second.requires_grad());
  CHECK_FALSE(x.argmax().requires_grad());
}

TEST_CASE("max, min, argmax and argmin errors name the op and the shape", "[reduce]") {
  Tensor x = zeros({2, 3});
  require_throws_with<IndexError>([&] { x.max(2); }, {"max", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.min(-3); }, {"min", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.argmax(5); }, {"argmax", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.argmin(2, true); }, {"argmin", "(2, 3)"});
  Tensor e = zeros({0, 3});
  require_throws_with<ValueError>([&] { e.max(); }, {"max", "(0, 3)"});
  require_throws_with<ValueError>([&] { e.min(); }, {"min", "(0, 3)"});
  require_throws_with<ValueError>([&] { e.argmax(); }, {"argmax", "(0, 3)"});
  require_throws_with<ValueError>([&] { e.max(0); }, {"max", "(0, 3)"});
  require_throws_with<ValueError>([&] { e.argmin(0); }, {"argmin", "(0, 3)"});
  // Reducing the non-empty dim of an empty tensor is fine and empty.
  CHECK(e.max(1).first.sizes() == Shape{0});
}

// ---- var and std -------------------------------------------------------------------------

TEST_CASE("var and std match a two-pass loop over dims, correction, keepdim, dtype, layout", "[reduce]") {
  for (DType dt : float_dtypes()) {
    for (auto& [layout, x] : layouts(dt)) {
      for (auto& [dims, sorted] : kDimCases) {
        for (int64_t correction : {0, 1, 2}) {
          for (bool keepdim : {false, true}) {
            INFO(dtype_name(dt) << " " << layout << " dims " << shape_str(dims) << " correction "
                                << correction << " keepdim " << keepdim);
            Tensor v = x.var(dims, correction, keepdim);
            Tensor s = x.std(dims, correction, keepdim);
            CHECK(v.sizes() == expected_shape(x.sizes(), sorted, keepdim));
            CHECK(s.sizes() == v.sizes());
            CHECK(v.dtype() == dt);
            auto var = [&](const std::vector<double>& r) { return ref_var(r, correction); };
            auto sd = [&](const std::vector<double>& r) { return std::sqrt(ref_var(r, correction)); };
            check_close(v, reduce_rows(x, sorted, var), dt, "var");
            check_close(s, reduce_rows(x, sorted, sd), dt, "std");
          }
        }
      }
    }
  }
  // A large row and large columns (the SIMD row path and column tiles, in parallel).
  Tensor big = random_nonzero({40, 3000}, kFloat32);
  check_close(big.var({1}), reduce_rows(big, {1}, [](auto& r) { return ref_var(r, 1); }), kFloat32, "rows");
  check_close(big.var({0}), reduce_rows(big, {0}, [](auto& r) { return ref_var(r, 1); }), kFloat32, "cols");
}

TEST_CASE("var and std with correction >= count give inf or nan, as PyTorch", "[reduce]") {
  Tensor two = tensor<double>({1, 2});
  CHECK(two.var({}, 2).item<double>() == kInf);  // 0.5 / 0
  CHECK(two.std({}, 3).item<double>() == kInf);
  CHECK(std::isnan(tensor<double>({3}).var().item<double>()));  // 0 / 0
  CHECK(std::isnan(tensor<float>({3, 3}).std({}, 2).item<double>()));
  CHECK(std::isnan(zeros({0}).var().item<double>()));
  Tensor e = zeros({2, 0}).var({1});
  CHECK(e.sizes() == Shape{2});
  CHECK(std::isnan(e.to_vector<double>()[1]));
  CHECK(std::isnan(scalar_tensor(4.0).var().item<double>()));
  CHECK(scalar_tensor(4.0).var({}, 0).item<double>() == 0);
}

TEST_CASE("var and std pass gradcheck, and a constant slice gives std a zero gradient", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  for (const Dims& dims : std::vector<Dims>{{}, {0}, {-1}, {0, 1}}) {
    for (int64_t correction : {0, 1}) {
      for (bool keepdim : {false, true}) {
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].var(dims, correction, keepdim); }, {x}));
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].std(dims, correction, keepdim); }, {x}));
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().var(dims, correction, keepdim); }, {xt}));
      }
    }
  }
  Tensor c = full({2, 3}, 1.5, kFloat64).requires_grad_(true);
  c.std({1}).sum().backward();
  CHECK(c.grad().to_vector<double>() == std::vector<double>(6, 0.0));
}

TEST_CASE("var, std and their errors: dtype and dim", "[reduce]") {
  Tensor x = zeros({2, 3});
  require_throws_with<IndexError>([&] { x.var({2}); }, {"var", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.std({0, -3}); }, {"std", "(2, 3)"});
  require_throws_with<DTypeError>([] { zeros({2, 3}, kInt64).var(); }, {"var", "int64", "(2, 3)"});
  require_throws_with<DTypeError>([] { zeros({2, 3}, kInt32).std(); }, {"std", "int32"});
}

// ---- logsumexp ---------------------------------------------------------------------------

TEST_CASE("logsumexp matches a plain loop over dims, keepdim, dtype and layout", "[reduce]") {
  for (DType dt : float_dtypes()) {
    for (auto& [layout, x] : layouts(dt)) {
      for (auto& [dims, sorted] : kDimCases) {
        for (bool keepdim : {false, true}) {
          INFO(dtype_name(dt) << " " << layout << " dims " << shape_str(dims) << " keepdim " << keepdim);
          Tensor l = x.logsumexp(dims, keepdim);
          CHECK(l.sizes() == expected_shape(x.sizes(), sorted, keepdim));
          CHECK(l.dtype() == dt);
          check_close(l, reduce_rows(x, sorted, ref_logsumexp), dt, "logsumexp");
        }
      }
    }
  }
  Tensor i = tensor<int64_t>({1, 2, 3});
  CHECK(i.logsumexp(0).dtype() == kFloat32);
  check_close(i.logsumexp(0), {ref_logsumexp({1, 2, 3})}, kFloat32);
}

TEST_CASE("logsumexp is stable for large and infinite values", "[reduce]") {
  CHECK(tensor<float>({1000, 1000}).logsumexp(0).item<double>() == Approx(1000 + std::log(2.0)));
  CHECK(tensor<float>({-1000, -1000}).logsumexp(0).item<double>() == Approx(-1000 + std::log(2.0)));
  CHECK(tensor<double>({-kInf, -kInf}).logsumexp(0).item<double>() == -kInf);
  CHECK(tensor<double>({kInf, 1}).logsumexp(0).item<double>() == kInf);
  CHECK(tensor<double>({-kInf, 0}).logsumexp(0).item<double>() == 0);
}

TEST_CASE("logsumexp passes gradcheck", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  for (const Dims& dims : std::vector<Dims>{{0}, {-1}, {0, 1}}) {
    for (bool keepdim : {false, true}) {
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].logsumexp(dims, keepdim); }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().logsumexp(dims, keepdim); }, {xt}));
    }
  }
  require_throws_with<IndexError>([] { zeros({2, 3}).logsumexp(2); }, {"logsumexp", "(2, 3)"});
}

// ---- norm ----------------------------------------------------------------------------------

TEST_CASE("norm matches a plain loop for p = 0, 0.5, 1, 2, 3, inf, -inf", "[reduce]") {
  for (DType dt : float_dtypes()) {
    for (auto& [layout, x] : layouts(dt)) {
      for (double p : {0.0, 0.5, 1.0, 2.0, 3.0, kInf, -kInf}) {
        for (auto& [dims, sorted] : kDimCases) {
          for (bool keepdim : {false, true}) {
            INFO(dtype_name(dt) << " " << layout << " p " << p << " dims " << shape_str(dims) << " keepdim " << keepdim);
            Tensor n = x.norm(p, dims, keepdim);
            CHECK(n.sizes() == expected_shape(x.sizes(), sorted, keepdim));
            CHECK(n.dtype() == dt);
            check_close(n, reduce_rows(x, sorted, [p](auto& r) { return ref_norm(r, p); }), dt, "norm");
          }
        }
      }
    }
  }
  // 16-bit norms accumulate in float: squares beyond float16's range do not overflow.
  Tensor big = full({4}, 300.0, kFloat16);
  CHECK(big.norm().item<double>() == Approx(600.0));
}

TEST_CASE("norm passes gradcheck, a zero norm gives a zero gradient, inf-norm ties share", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  for (double p : {1.0, 2.0, 3.0, 1.5, 0.5, kInf, -kInf}) {
    for (const Dims& dims : std::vector<Dims>{{}, {0}, {-1}}) {
      for (bool keepdim : {false, true}) {
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].norm(p, dims, keepdim); }, {x}));
      }
    }
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().norm(p, {1}); }, {xt}));
  }
  for (double p : {2.0, 3.0, 1.5}) {
    Tensor z = zeros({3}, kFloat64).requires_grad_(true);
    z.norm(p).backward();
    CHECK(z.grad().to_vector<double>() == std::vector<double>{0, 0, 0});
  }
  Tensor t = tensor<double>({-3, 3, 1}).requires_grad_(true);
  t.norm(kInf).backward();
  CHECK(t.grad().to_vector<double>() == std::vector<double>{-0.5, 0.5, 0});
}

TEST_CASE("norm errors name the op and the shape", "[reduce]") {
  require_throws_with<IndexError>([] { zeros({2, 3}).norm(2, {3}); }, {"norm", "(2, 3)"});
  require_throws_with<DTypeError>([] { zeros({2, 3}, kInt64).norm(); }, {"norm", "int64", "(2, 3)"});
  require_throws_with<ValueError>([] { zeros({0, 3}).norm(kInf); }, {"norm", "(0, 3)"});
}

// ---- cumsum ------------------------------------------------------------------------------------

TEST_CASE("cumsum matches a plain loop along every dim, dtype and layout", "[reduce]") {
  for (DType dt : numeric_dtypes()) {
    for (auto& [layout, x] : layouts(dt, 0.1, 2)) {
      for (int64_t dim : {0, 1, 2, -1}) {
        const int64_t d = dim < 0 ? dim + 3 : dim;
        INFO(dtype_name(dt) << " " << layout << " dim " << dim);
        Tensor c = x.cumsum(dim);
        CHECK(c.sizes() == x.sizes());
        CHECK(c.dtype() == (is_floating_point(dt) ? dt : kInt64));
        std::vector<double> ref;
        for (const std::vector<double>& row : rows_of(x, {d})) {
          double acc = 0;
          for (double v : row) ref.push_back(acc += v);
        }
        check_close(moved_last(c, {d}), ref, dt, "cumsum");
      }
    }
  }
  Tensor b = tensor<bool>({true, false, true});
  CHECK(b.cumsum(0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2});
  CHECK(scalar_tensor(3.0).cumsum(0).item<double>() == 3.0);
  Tensor big = random_nonzero({70, 1500}, kFloat32, 0.1, 2);
  std::vector<double> ref;
  for (const std::vector<double>& row : rows_of(big, {0})) {
    double acc = 0;
    for (double v : row) ref.push_back(acc += v);
  }
  check_close(moved_last(big.cumsum(0), {0}), ref, kFloat32, "large cumsum");
}

TEST_CASE("cumsum passes gradcheck and rejects a bad dim", "[reduce]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});
  for (int64_t dim : {0, 1, -1}) {
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].cumsum(dim); }, {x}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().cumsum(dim); }, {xt}));
    // The backward (a reverse cumsum) applied to a non-contiguous, broadcast gradient.
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].cumsum(dim).sum(0); }, {x}));
  }
  require_throws_with<IndexError>([] { zeros({2, 3}).cumsum(2); }, {"cumsum", "(2, 3)"});
}

TEST_CASE("reductions reject out-of-range dims naming the op and the shape", "[reduce]") {
  Tensor x = zeros({2, 3});
  require_throws_with<IndexError>([&] { x.sum(2); }, {"sum", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.sum(Dims{0, -3}); }, {"sum", "(2, 3)"});
  require_throws_with<IndexError>([&] { x.mean(-3); }, {"mean", "(2, 3)"});
}
