// cat and stack against plain-loop references (every dim, dtype promotion, non-contiguous
// inputs, PyTorch's legacy 1-D empty tensors), their gradients and errors.
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

int64_t prod(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

// Row-major output seen as (outer, ..., inner): for every outer index, each input's
// block of `inner` elements in turn.
std::vector<double> interleave(const std::vector<Tensor>& ts, int64_t outer,
                               const std::vector<int64_t>& inner) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : ts) v.push_back(values(t));
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t t = 0; t < ts.size(); ++t)
      out.insert(out.end(), v[t].begin() + o * inner[t], v[t].begin() + (o + 1) * inner[t]);
  }
  return out;
}

std::vector<double> ref_cat(const std::vector<Tensor>& ts, int64_t dim) {
  std::vector<int64_t> block;  // elements of each input per outer index
  for (const Tensor& t : ts) block.push_back(prod(t.sizes(), size_t(dim), t.sizes().size()));
  return interleave(ts, prod(ts[0].sizes(), 0, size_t(dim)), block);
}

std::vector<double> ref_stack(const std::vector<Tensor>& ts, int64_t dim) {
  const Shape& s = ts[0].sizes();
  return interleave(ts, prod(s, 0, size_t(dim)),
                    std::vector<int64_t>(ts.size(), prod(s, size_t(dim), s.size())));
}

// Three tensors that differ along dim (sizes 1, 3, 2 there), in three layouts.
std::vector<Tensor> cat_inputs(int64_t dim, DType dt) {
  auto shape_with = [&](int64_t n) {
    Shape s{2, 3, 4};
    s[size_t(dim)] = n;
    return s;
  };
  Shape a = shape_with(1), b = shape_with(3), c = shape_with(2);
  return {
      random_nonzero(a, dt),
      random_nonzero({b[2], b[1], b[0]}, dt).transpose(0, 2),
      random_nonzero({c[0], c[1], 2 * c[2]}, dt).slice(2, 1, 2 * c[2], 2),
  };
}

std::vector<DType> join_dtypes() {
  std::vector<DType> v = float_dtypes();
  v.insert(v.end(), {kInt64, kInt32, kBool});
  return v;
}

}  // namespace

TEST_CASE("cat matches a plain loop along every dim, dtype and layout", "[index]") {
  for (DType dt : join_dtypes()) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<Tensor> ts = cat_inputs(dim, dt);
      Tensor out = cat(ts, dim);
      Shape shape{2, 3, 4};
      shape[size_t(dim)] = 6;
      REQUIRE(out.sizes() == shape);
      REQUIRE(out.dtype() == dt);
      check_close(out, ref_cat(ts, dim), dt, "dim " + std::to_string(dim));
      check_close(cat(ts, dim - 3), ref_cat(ts, dim), dt, "negative dim");
    }
  }
  // One input, and one empty along dim.
  Tensor x = random_nonzero({3, 4});
  check_close(cat({x}, 1), values(x), kFloat32);
  Tensor y = random_nonzero({3, 2});
  check_close(cat({x, empty({3, 0}), y}, 1), ref_cat({x, y}, 1), kFloat32);
  // Big enough for the copies to split across threads.
  Tensor big_a = random_nonzero({300, 200}), big_b = random_nonzero({200, 300}).t();
  check_close(cat({big_a, big_b}, 1), ref_cat({big_a, big_b}, 1), kFloat32);
}

TEST_CASE("cat promotes to the common dtype", "[index]") {
  struct Case {
    DType a, b, expected;
  };
  for (Case c : {Case{kFloat32, kFloat64, kFloat64}, Case{kInt32, kInt64, kInt64},
                 Case{kInt64, kFloat16, kFloat16}, Case{kFloat16, kBFloat16, kFloat32},
                 Case{kBool, kInt32, kInt32}}) {
    Tensor a = random_nonzero({2, 3}, c.a), b = random_nonzero({1, 3}, c.b);
    Tensor out = cat({a, b});
    REQUIRE(out.dtype() == c.expected);
    check_close(out, ref_cat({a, b}, 0), c.expected, dtype_name(c.expected));
  }
}

TEST_CASE("cat skips 1-D empty tensors as PyTorch does", "[index]") {
  Tensor x = random_nonzero({2, 3});
  Tensor legacy = empty({0});
  Tensor out = cat({legacy, x, legacy}, 1);
  REQUIRE(out.sizes() == Shape{2, 3});
  check_close(out, values(x), kFloat32);
  CHECK(cat({legacy, legacy}).sizes() == Shape{0});
  CHECK(cat({empty({0}, kFloat64), x}).dtype() == kFloat64);  // it still takes part in promotion
  Tensor v = random_nonzero({4});
  check_close(cat({legacy, v}), values(v), kFloat32);  // all 1-D: an ordinary cat

  // Gradients flow to x; the skipped tensor gets an empty one.
  Tensor xl = leaf({2, 3});
  Tensor el = zeros({0}, kFloat64).requires_grad_(true);
  Tensor g = random_nonzero({2, 3}, kFloat64);
  cat({el, xl}, 0).backward(g);
  check_close(xl.grad(), values(g), kFloat64);
  CHECK(el.grad().sizes() == Shape{0});
}

TEST_CASE("stack matches a plain loop along every dim, dtype and layout", "[index]") {
  for (DType dt : join_dtypes()) {
    std::vector<Tensor> ts{random_nonzero({2, 3}, dt), random_nonzero({3, 2}, dt).t(),
                           random_nonzero({2, 6}, dt).slice(1, 0, 6, 2)};
    for (int64_t dim = 0; dim <= 2; ++dim) {
      Tensor out = stack(ts, dim);
      Shape shape{2, 3};
      shape.insert(shape.begin() + dim, 3);
      REQUIRE(out.sizes() == shape);
      check_close(out, ref_stack(ts, dim), dt, "dim " + std::to_string(dim));
      check_close(stack(ts, dim - 3), ref_stack(ts, dim), dt, "negative dim");
    }
  }
  Tensor s = stack({scalar_tensor(1.5), scalar_tensor(-2.0)});
  REQUIRE(s.sizes() == Shape{2});
  check_close(s, {1.5, -2.0}, kFloat32);
}

TEST_CASE("cat and stack pass gradcheck", "[index]") {
  Tensor a = leaf({2, 3}), b = leaf({3, 2}), c = leaf({2, 3});
  // b is used transposed (non-contiguous); cat along both dims, stack along all three.
  for (int64_t dim : {0, 1, -1}) {
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return cat({in[0], in[1].t(), in[2]}, dim); },
                    {a, b, c}));
  }
  for (int64_t dim : {0, 1, 2}) {
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return stack({in[0], in[1].t(), in[2]}, dim); },
                    {a, b, c}));
  }
  // Only some inputs need grad.
  Tensor constant = random_nonzero({1, 3}, kFloat64);
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return cat({in[0], in[1]}, 0); }, {constant, a}));
}

TEST_CASE("cat gradients come back in each input's dtype", "[index]") {
  Tensor a = random_nonzero({2, 2}, kFloat32).requires_grad_(true);
  Tensor b = random_nonzero({2, 1}, kFloat64).requires_grad_(true);
  Tensor out = cat({a, b}, 1);
  REQUIRE(out.dtype() == kFloat64);
  Tensor g = random_nonzero({2, 3}, kFloat64);
  out.backward(g);
  REQUIRE(a.grad().dtype() == kFloat32);
  REQUIRE(b.grad().dtype() == kFloat64);
  const std::vector<double> gv = values(g);
  check_close(a.grad(), {gv[0], gv[1], gv[3], gv[4]}, kFloat32);
  check_close(b.grad(), {gv[2], gv[5]}, kFloat64);
}

TEST_CASE("cat and stack errors name the op, the shapes and the dim", "[index]") {
  Tensor x = random_nonzero({2, 3}), y = random_nonzero({4, 5});
  require_throws_with<ValueError>([&] { cat({}); }, {"cat", "empty"});
  require_throws_with<ValueError>([&] { stack({}); }, {"stack", "empty"});
  require_throws_with<ShapeError>([&] { cat({x, y}, 1); }, {"cat", "(2, 3)", "(4, 5)", "dim 1", "dim 0"});
  require_throws_with<ShapeError>([&] { cat({x, random_nonzero({3, 3})}, 1); },
                                  {"cat", "(2, 3)", "(3, 3)", "dim 1"});
  require_throws_with<ShapeError>([&] { cat({x, random_nonzero({2, 3, 1})}); },
                                  {"cat", "(2, 3)", "(2, 3, 1)"});
  require_throws_with<ShapeError>([&] { cat({scalar_tensor(1.0), scalar_tensor(2.0)}); }, {"cat", "0-dim"});
  require_throws_with<ShapeError>([&] { cat({x, scalar_tensor(2.0)}); }, {"cat", "(2, 3)", "()"});
  require_throws_with<IndexError>([&] { cat({x, x}, 2); }, {"cat", "2"});
  require_throws_with<ShapeError>([&] { stack({x, random_nonzero({2, 4})}); }, {"stack", "(2, 3)", "(2, 4)"});
  require_throws_with<IndexError>([&] { stack({x, x}, 3); }, {"stack", "3"});
  // Device mismatch needs a CUDA tensor: not constructible in a CPU-only build.
}
