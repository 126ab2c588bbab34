// sort, argsort and topk (autograd/functions/sort.cpp, kernels/cpu/sort.cpp) against the
// std::stable_sort reference of tests/sort_reference.h: every dtype, odd sizes, every dim,
// non-contiguous inputs, ties and NaNs, k = 0 and k = size, empty dims; PyTorch's order on
// small cases written out; errors; the values' gradient by float64 finite differences.
#include "catch2_compat.h"

#include <cmath>
#include <limits>

#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/sort_reference.h"
#include "tests/test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const std::vector<DType> kAllDtypes{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

void check_against_reference(const Tensor& x, int64_t dim, bool descending, int64_t k, bool is_topk) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  INFO("shape " << shape_str(x.sizes()) << " dim " << dim << (descending ? " descending" : " ascending") << " k "
                << k << " " << dtype_name(x.dtype()) << (x.is_contiguous() ? "" : " (non-contiguous)"));
  const SortReference ref = reference_sort(x, d, descending, k);
  const auto [values, indices] = is_topk ? x.topk(k, dim, descending) : x.sort(dim, descending);
  REQUIRE(values.sizes() == ref.shape);
  REQUIRE(indices.sizes() == ref.shape);
  REQUIRE(values.dtype() == x.dtype());
  REQUIRE(indices.dtype() == kInt64);
  REQUIRE(indices.to_vector<int64_t>() == ref.indices);
  REQUIRE(same_values(values.to_vector<double>(), ref.values));
  if (!is_topk) REQUIRE(x.argsort(dim, descending).to_vector<int64_t>() == ref.indices);
}

}  // namespace

TEST_CASE("sort, argsort: every dtype, dim and direction equal a stable reference sort", "[sort]") {
  manual_seed(7);
  for (DType dtype : kAllDtypes) {
    for (const Shape& shape : std::vector<Shape>{{1}, {17}, {3, 7, 5}, {2, 33}}) {
      const Tensor x = tied_values(shape, dtype);
      for (int64_t dim = -1; dim < int64_t(shape.size()); ++dim)
        for (bool descending : {false, true}) check_against_reference(x, dim, descending, x.size(dim), false);
    }
  }
}

TEST_CASE("sort, topk: non-contiguous inputs and long rows", "[sort]") {
  manual_seed(8);
  for (DType dtype : {kFloat32, kInt64, kFloat16}) {
    const Tensor base = tied_values({5, 6, 9}, dtype);
    for (const Tensor& x : {base.transpose(0, 2), base.transpose(1, 2), base.select(1, 3)}) {
      REQUIRE_FALSE(x.is_contiguous());
      for (int64_t dim = 0; dim < x.dim(); ++dim) {
        check_against_reference(x, dim, true, x.size(dim), false);
        check_against_reference(x, dim, false, std::min<int64_t>(3, x.size(dim)), true);
      }
    }
  }
  const Tensor wide = randn({3, 4099}, kFloat64);
  check_against_reference(wide, 1, false, 4099, false);
  check_against_reference(wide, 1, true, 100, true);
}

TEST_CASE("topk: every dtype, k from 0 to the size, largest and smallest", "[sort]") {
  manual_seed(9);
  for (DType dtype : kAllDtypes) {
    const Tensor x = tied_values({4, 11, 3}, dtype);
    for (int64_t dim = 0; dim < 3; ++dim)
      for (int64_t k : {int64_t(0), int64_t(1), int64_t(2), x.size(dim)})
        for (bool largest : {true, false}) check_against_reference(x, dim, largest, k, true);
  }
}

TEST_CASE("sort, topk: PyTorch's order of NaNs and ties", "[sort]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tensor({3.0, nan, 1.0, nan, 2.0});
  auto [up, up_i] = x.sort();
  REQUIRE(up_i.to_vector<int64_t>() == std::vector<int64_t>{2, 4, 0, 1, 3});
  REQUIRE(same_values(up.to_vector<double>(), {1, 2, 3, nan, nan}));
  auto [down, down_i] = x.sort(0, /*descending=*/true);
  REQUIRE(down_i.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 4, 2});
  REQUIRE(same_values(down.to_vector<double>(), {nan, nan, 3, 2, 1}));
  // NaN is the largest: topk takes it first.
  REQUIRE(x.topk(2).second.to_vector<int64_t>() == std::vector<int64_t>{1, 3});
  REQUIRE(x.topk(2, -1, /*largest=*/false).second.to_vector<int64_t>() == std::vector<int64_t>{2, 4});

  // Stable in both directions: ties keep their input order; topk takes the first ones.
  const Tensor t = tensor({1, 0, 1, 0, 1});
  REQUIRE(t.argsort().to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 2, 4});
  REQUIRE(t.argsort(0, true).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 1, 3});
  REQUIRE(tensor({5, 7, 7, 1, 7}).topk(2).second.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  // -0.0 and 0.0 are equal.
  REQUIRE(tensor({0.0f, -0.0f, -1.0f}).argsort().to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1});
  // The free functions are the methods.
  REQUIRE(loom::argsort(t, 0, true).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 1, 3});
  REQUIRE(loom::topk(t, 1).first.item<int64_t>() == 1);
  REQUIRE(loom::sort(t).first.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 1, 1});
}

TEST_CASE("sort, topk: empty dims, 0-dim tensors", "[sort]") {
  auto [v, i] = zeros({3, 0}).sort(1);
  REQUIRE(v.sizes() == Shape{3, 0});
  REQUIRE(i.sizes() == Shape{3, 0});
  REQUIRE(zeros({0, 4}).sort(0).first.sizes() == Shape{0, 4});
  REQUIRE(zeros({0, 4}).topk(2, 1).second.sizes() == Shape{0, 2});
  REQUIRE(zeros({3, 0}).topk(0, 1).first.sizes() == Shape{3, 0});
  REQUIRE(randn({4, 5}).topk(0, 1).first.sizes() == Shape{4, 0});
  auto [s, si] = tensor({5.0f}).reshape({}).sort();
  REQUIRE(s.dim() == 0);
  REQUIRE(s.item<float>() == 5.0f);
  REQUIRE(si.item<int64_t>() == 0);
  REQUIRE(tensor({5.0f}).reshape({}).topk(1).first.dim() == 0);
}

TEST_CASE("sort, topk: bad k and dims are typed errors naming the op and the shape", "[sort]") {
  const Tensor x = randn({3, 5});
  require_throws_with<ValueError>([&] { x.topk(6); }, {"topk", "k = 6", "size 5", "(3, 5)"});
  REQUIRE_THROWS_AS(x.topk(6), ValueError);
  REQUIRE_THROWS_AS(x.topk(-1), ValueError);
  REQUIRE_THROWS_AS(x.topk(4, 0), ValueError);
  REQUIRE_THROWS_AS(x.sort(2), IndexError);
  require_throws_with<IndexError>([&] { x.argsort(-3); }, {"sort", "dim -3", "(3, 5)"});
  REQUIRE_THROWS_AS(x.topk(1, 2), IndexError);
}

TEST_CASE("sort, topk: the values' gradient goes back to their positions (float64 gradcheck)", "[sort][autograd]") {
  manual_seed(10);
  const Tensor a = leaf({4, 5});
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return in[0].sort(1).first; }, {a}));
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return in[0].sort(0, true).first; }, {a}));
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return in[0].topk(2, 0).first; }, {a}));
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return in[0].topk(3, 1, false).first; }, {a}));
  // Through a non-contiguous input, and a 0-dim one.
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return in[0].t().topk(2, 1).first; }, {a}));
  const Tensor s = leaf({1}).reshape({}).detach().requires_grad_(true);
  REQUIRE(gradcheck([](const std::vector<Tensor>& in) { return in[0].sort().first; }, {s}));
  // Positions not taken by topk get zero.
  const Tensor b = tensor({1.0, 4.0, 2.0, 3.0}).requires_grad_(true);
  b.topk(2).first.sum().backward();
  REQUIRE(b.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 1});
  REQUIRE(b.topk(2).first.grad_fn() != nullptr);
}
