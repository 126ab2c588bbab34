// Indexing ops: index_select, index_add (the kernel behind its backward), gather,
// scatter_add, tril/triu, embedding and one_hot, against plain-loop references in double;
// gradients (gradcheck, and embedding's padding_idx) and the error paths.
#include "kernels/kernels.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const std::vector<DType> kIndexDTypes{kInt64, kInt32};

std::vector<DType> numeric_dtypes() {
  std::vector<DType> v = float_dtypes();
  v.push_back(kInt64);
  v.push_back(kInt32);
  return v;
}

int64_t count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Row-major multi-index of element i, and back.
Dims unravel(int64_t i, const Shape& shape) {
  Dims idx(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    idx[size_t(d)] = i % shape[size_t(d)];
    i /= shape[size_t(d)];
  }
  return idx;
}

int64_t ravel(const Dims& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// A (a, b, c) tensor of dtype dt in several memory layouts.
std::vector<std::pair<std::string, Tensor>> layouts(const Shape& s, DType dt, double low = -2,
                                                    double high = 2) {
  return {
      {"contiguous", random_nonzero(s, dt, low, high)},
      {"transposed", random_nonzero({s[2], s[1], s[0]}, dt, low, high).transpose(0, 2)},
      {"sliced", random_nonzero({s[0], 2 * s[1], s[2]}, dt, low, high).slice(1, 0, 2 * s[1], 2)},
      {"expanded", random_nonzero({s[0], 1, s[2]}, dt, low, high).expand(s)},
  };
}

// Random indices in [0, n) of `shape`, contiguous or transposed (3-D) / strided (1-D).
Tensor random_index(int64_t n, const Shape& shape, DType dt, bool contiguous) {
  if (contiguous) return randint(0, n, shape, dt);
  if (shape.size() == 1) return randint(0, n, {2 * shape[0]}, dt).slice(0, 0, 2 * shape[0], 2);
  return randint(0, n, {shape[2], shape[1], shape[0]}, dt).transpose(0, 2);
}

// ---- references --------------------------------------------------------------------------

std::vector<double> ref_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = values(x);
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  Shape shape = x.sizes();
  shape[size_t(dim)] = int64_t(iv.size());
  std::vector<double> out(size_t(count(shape)));
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    Dims p = unravel(i, shape);
    p[size_t(dim)] = iv[size_t(p[size_t(dim)])];
    out[size_t(i)] = xv[size_t(ravel(p, x.sizes()))];
  }
  return out;
}

// out = self; out[..., index[p], ...] += src[p] over index's positions p (along dim).
std::vector<double> ref_scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                                    const Tensor& src) {
  std::vector<double> out = values(self);
  const std::vector<double> sv = values(src);
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i) {
    Dims p = unravel(i, index.sizes());
    const double v = sv[size_t(ravel(p, src.sizes()))];
    p[size_t(dim)] = iv[size_t(i)];
    out[size_t(ravel(p, self.sizes()))] += v;
  }
  return out;
}

std::vector<double> ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = values(x);
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  std::vector<double> out(iv.size());
  for (int64_t i = 0; i < index.numel(); ++i) {
    Dims p = unravel(i, index.sizes());
    p[size_t(dim)] = iv[size_t(i)];
    out[size_t(i)] = xv[size_t(ravel(p, x.sizes()))];
  }
  return out;
}

std::vector<double> ref_triangle(const Tensor& x, int64_t k, bool lower) {
  std::vector<double> out = values(x);
  const int64_t rows = x.size(-2), cols = x.size(-1);
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    const int64_t r = (i / cols) % rows, c = i % cols;
    if (lower ? c - r > k : c - r < k) out[size_t(i)] = 0;
  }
  return out;
}

// f(dtype, index dtype, layout name, x (4, 5, 6), dim, whether the index is contiguous)
// for every combination: the sweep of the select-like ops.
template <typename F>
void for_each_case(F f) {
  for (DType dt : numeric_dtypes())
    for (DType it : kIndexDTypes)
      for (auto& [layout, x] : layouts({4, 5, 6}, dt))
        for (int64_t dim = 0; dim < 3; ++dim)
          for (bool contiguous_index : {true, false}) f(dt, it, layout, x, dim, contiguous_index);
}

// Runs f with n threads, then restores the previous count.
template <typename F>
auto with_threads(int n, F f) {
  const int before = get_num_threads();
  set_num_threads(n);
  auto result = f();
  set_num_threads(before);
  return result;
}

}  // namespace

// ---- index_select --------------------------------------------------------------------------

TEST_CASE("index_select matches a plain loop for every dtype, dim and layout", "[index]") {
  for_each_case([](DType dt, DType it, const std::string& layout, const Tensor& x, int64_t dim,
                   bool contiguous_index) {
    Tensor index = random_index(x.size(dim), {7}, it, contiguous_index);
    Tensor out = x.index_select(dim, index);
    Shape shape = x.sizes();
    shape[size_t(dim)] = 7;
    REQUIRE(out.sizes() == shape);
    REQUIRE(out.dtype() == dt);
    check_close(out, ref_index_select(x, dim, index), dt, layout + " dim " + std::to_string(dim));
  });
}

TEST_CASE("index_select: negative dim, 0-D and empty index, bool, large parallel rows", "[index]") {
  Tensor x = random_nonzero({3, 4}, kFloat64);
  Tensor index = tensor<int64_t>({3, 0, 3});
  check_close(x.index_select(-1, index), ref_index_select(x, 1, index), kFloat64);

  Tensor scalar_index = scalar_tensor(2, kInt64);
  Tensor one = x.index_select(0, scalar_index);
  REQUIRE(one.sizes() == Shape{1, 4});
  check_close(one, ref_index_select(x, 0, scalar_index.reshape({1})), kFloat64);

  Tensor none = x.index_select(1, empty({0}, kInt32));
  CHECK(none.sizes() == Shape{3, 0});

  Tensor b = random_nonzero({5, 3}) > 0;
  Tensor bi = tensor<int64_t>({4, 4, 0});
  check_close(b.index_select(0, bi), ref_index_select(b, 0, bi), kBool);

  // Big enough to split rows (contiguous memcpy path) and columns (strided path) across threads.
  Tensor big = random_nonzero({300, 64}, kFloat32);
  Tensor big_index = randint(0, 300, {700}, kInt32);
  check_close(big.index_select(0, big_index), ref_index_select(big, 0, big_index), kFloat32);
  Tensor big_t = big.t();  // (64, 300): rows of stride 1 along dim 1
  check_close(big_t.index_select(1, big_index), ref_index_select(big_t, 1, big_index), kFloat32);
}

// ---- index_add (kernel) --------------------------------------------------------------------

TEST_CASE("index_add kernel sums colliding rows for every dtype, dim and layout", "[index]") {
  for (DType dt : numeric_dtypes()) {
    for (DType it : kIndexDTypes) {
      for (auto& [layout, src] : layouts({4, 5, 6}, dt, 0.1, 2.0)) {
        for (int64_t dim = 0; dim < 3; ++dim) {
          Shape out_shape = src.sizes();
          out_shape[size_t(dim)] = 3;  // 4..6 sources into 3 rows: collisions
          Tensor out = random_nonzero(out_shape, dt, 0.1, 2.0);
          Tensor index = random_index(3, {src.size(dim)}, it, layout != "sliced");
          std::vector<double> expected(values(out));
          // Reference: out[..., index[i], ...] += src[..., i, ...].
          const std::vector<double> sv = values(src);
          const std::vector<int64_t> iv = index.to_vector<int64_t>();
          for (int64_t i = 0; i < src.numel(); ++i) {
            Dims p = unravel(i, src.sizes());
            p[size_t(dim)] = iv[size_t(p[size_t(dim)])];
            expected[size_t(ravel(p, out_shape))] += sv[size_t(i)];
          }
          kernels::index_add(out, dim, index, src);
          check_close(out, expected, dt, layout + " dim " + std::to_string(dim));
        }
      }
    }
  }
}

TEST_CASE("index_add is deterministic across thread counts (embedding-shaped)", "[index]") {
  // (tokens, dim) rows added into a (vocab, dim) table with many repeats.
  Tensor src = random_nonzero({4096, 48}, kFloat32);
  Tensor index = randint(0, 50, {4096}, kInt64);
  auto run = [&] {
    Tensor out = zeros({50, 48}, kFloat32);
    kernels::index_add(out, 0, index, src);
    return out.to_vector<float>();
  };
  std::vector<float> one = with_threads(1, run);
  std::vector<float> two = with_threads(2, run);
  REQUIRE(one == two);  // bitwise
  // And each element is the float sum in token order, as a plain loop computes it.
  const std::vector<float> sv = src.to_vector<float>();
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  std::vector<float> expected(50 * 48, 0.0f);
  for (int64_t t = 0; t < 4096; ++t)
    for (int64_t c = 0; c < 48; ++c) expected[size_t(iv[size_t(t)] * 48 + c)] += sv[size_t(t * 48 + c)];
  CHECK(one == expected);
}

// ---- gather / scatter_add --------------------------------------------------------------------

TEST_CASE("gather matches a plain loop for every dtype, dim and layout", "[index]") {
  for_each_case([](DType dt, DType it, const std::string& layout, const Tensor& x, int64_t dim,
                   bool contiguous_index) {
    // index smaller than x outside dim, larger along it (repeats)
    Shape ishape{3, 4, 5};
    ishape[size_t(dim)] = 7;
    Tensor index = random_index(x.size(dim), ishape, it, contiguous_index);
    Tensor out = x.gather(dim, index);
    REQUIRE(out.sizes() == ishape);
    check_close(out, ref_gather(x, dim, index), dt, layout + " dim " + std::to_string(dim));
  });
  // 0-dim self and index, and a bool source.
  Tensor s = scalar_tensor(3.5, kFloat64);
  CHECK(s.gather(0, scalar_tensor(0, kInt64)).item<double>() == 3.5);
  Tensor b = random_nonzero({3, 4}) > 0;
  Tensor bi = randint(0, 4, {3, 2}, kInt64);
  check_close(b.gather(1, bi), ref_gather(b, 1, bi), kBool);
}

TEST_CASE("scatter_add matches a plain loop for every dtype, dim and layout", "[index]") {
  for (DType dt : numeric_dtypes()) {
    for (DType it : kIndexDTypes) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        auto selfs = layouts({4, 5, 6}, dt, 0.1, 2.0);
        auto srcs = layouts({5, 6, 7}, dt, 0.1, 2.0);  // larger than index everywhere
        for (size_t l = 0; l < selfs.size(); ++l) {
          Tensor self = selfs[l].second, src = srcs[l].second;
          Shape ishape{3, 4, 5};
          ishape[size_t(dim)] = 5;
          Tensor index = random_index(self.size(dim), ishape, it, l % 2 == 0);
          Tensor out = self.scatter_add(dim, index, src);
          REQUIRE(out.sizes() == self.sizes());
          check_close(out, ref_scatter_add(self, dim, index, src), dt,
                      selfs[l].first + " dim " + std::to_string(dim));
        }
      }
    }
  }
}

TEST_CASE("scatter_add leaves self unchanged and is deterministic across thread counts", "[index]") {
  Tensor self = random_nonzero({8, 3000}, kFloat32);
  std::vector<float> before = self.to_vector<float>();
  Tensor src = random_nonzero({40, 3000}, kFloat32);
  Tensor index = randint(0, 8, {40, 3000}, kInt64);
  auto run = [&] { return self.scatter_add(0, index, src).to_vector<float>(); };
  std::vector<float> one = with_threads(1, run);
  std::vector<float> two = with_threads(2, run);
  CHECK(one == two);
  CHECK(self.to_vector<float>() == before);
  check_close(from_vector(one, {8, 3000}), ref_scatter_add(self, 0, index, src), kFloat32);
}

// ---- tril / triu -------------------------------------------------------------------------------

TEST_CASE("tril and triu match a plain loop for every dtype, diagonal and layout", "[index]") {
  std::vector<DType> dtypes = numeric_dtypes();
  dtypes.push_back(kBool);
  for (DType dt : dtypes) {
    std::vector<std::pair<std::string, Tensor>> inputs{
        {"2-D", random_nonzero({5, 7}, dt)},
        {"batched", random_nonzero({2, 3, 6, 4}, dt)},
        {"transposed", random_nonzero({7, 5}, dt).t()},
        {"batch-transposed", random_nonzero({4, 3, 5}, dt).transpose(0, 2)},
        {"sliced", random_nonzero({3, 6, 10}, dt).slice(2, 1, 10, 2)},
    };
    for (auto& [name, x] : inputs) {
      for (int64_t k : {-10, -2, -1, 0, 1, 3, 10}) {
        check_close(x.tril(k), ref_triangle(x, k, true), dt, name + " tril " + std::to_string(k));
        check_close(x.triu(k), ref_triangle(x, k, false), dt, name + " triu " + std::to_string(k));
      }
    }
  }
  Tensor big = random_nonzero({3, 130, 150}, kFloat32);  // split across threads
  check_close(big.tril(), ref_triangle(big, 0, true), kFloat32);
  check_close(big.transpose(1, 2).triu(-5), ref_triangle(big.transpose(1, 2), -5, false), kFloat32);
  CHECK(zeros({0, 3}).tril().sizes() == Shape{0, 3});
}

// ---- embedding / one_hot ------------------------------------------------------------------------

TEST_CASE("embedding looks up rows for every dtype and layout", "[index]") {
  for (DType dt : float_dtypes()) {
    for (DType it : kIndexDTypes) {
      for (bool contiguous : {true, false}) {
        Tensor weight = contiguous ? random_nonzero({10, 16}, dt) : random_nonzero({16, 10}, dt).t();
        Tensor indices = random_index(10, {2, 3, 4}, it, contiguous);
        Tensor out = embedding(weight, indices);
        REQUIRE(out.sizes() == Shape{2, 3, 4, 16});
        check_close(out.reshape({24, 16}), ref_index_select(weight, 0, indices.reshape({24})), dt);
      }
    }
  }
  CHECK(embedding(random_nonzero({4, 3}), empty({0}, kInt64)).sizes() == Shape{0, 3});
}

TEST_CASE("embedding gradient sums repeated rows and skips padding_idx", "[index]") {
  Tensor weight = leaf({6, 3});
  Tensor indices = tensor<int64_t>({1, 4, 1, 2, 4, 4}, {2, 3});
  Tensor g = random_nonzero({2, 3, 3}, kFloat64);
  for (int64_t padding_idx : {-1, 4}) {
    weight.mutable_grad() = Tensor();
    embedding(weight, indices, padding_idx).backward(g);
    const std::vector<double> gv = values(g);
    std::vector<double> expected(18, 0.0);
    for (int64_t t = 0; t < 6; ++t) {
      const int64_t row = indices.reshape({6}).to_vector<int64_t>()[size_t(t)];
      if (row == padding_idx) continue;
      for (int64_t c = 0; c < 3; ++c) expected[size_t(row * 3 + c)] += gv[size_t(t * 3 + c)];
    }
    check_close(weight.grad(), expected, kFloat64, "padding_idx " + std::to_string(padding_idx));
  }
  // The forward still reads the padding row.
  check_close(embedding(weight, indices, 4).reshape({6, 3}),
              ref_index_select(weight, 0, indices.reshape({6})), kFloat64);
}

TEST_CASE("one_hot matches a plain loop", "[index]") {
  for (DType it : kIndexDTypes) {
    Tensor indices = tensor<int64_t>({2, 0, 1, 2, 4, 0}, {2, 3}).to(it);
    for (int64_t num_classes : {-1, 5, 7}) {
      Tensor out = one_hot(indices, num_classes);
      const int64_t c = num_classes == -1 ? 5 : num_classes;
      REQUIRE(out.sizes() == Shape{2, 3, c});
      REQUIRE(out.dtype() == kInt64);
      std::vector<double> expected(size_t(6 * c), 0.0);
      const std::vector<int64_t> iv = indices.to_vector<int64_t>();
      for (int64_t i = 0; i < 6; ++i) expected[size_t(i * c + iv[size_t(i)])] = 1;
      check_close(out, expected, kInt64);
    }
  }
  Tensor strided = tensor<int64_t>({3, 9, 1, 9, 0, 9}).slice(0, 0, 6, 2);  // {3, 1, 0}
  CHECK(one_hot(strided).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0});
  CHECK(one_hot(empty({0}, kInt64), 3).sizes() == Shape{0, 3});
}

// ---- gradients -----------------------------------------------------------------------------------

TEST_CASE("index_select, gather and scatter_add pass gradcheck", "[index]") {
  Tensor x = leaf({3, 4});
  Tensor xt = leaf({4, 3});  // used transposed: non-contiguous
  for (int64_t dim : {0, 1}) {
    Tensor index = tensor<int64_t>({2, 0, 2});  // a repeat: gradients add up
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].index_select(dim, in[1]); },
                    {x, index}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().index_select(dim, in[1]); },
                    {xt, index.to(kInt32)}));

    Tensor gindex = dim == 0 ? tensor<int64_t>({2, 0, 1, 2, 2, 1}, {2, 3})
                             : tensor<int64_t>({3, 0, 3, 1, 1, 1, 0, 2, 0}, {3, 3});
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].gather(dim, in[1]); }, {x, gindex}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].t().gather(dim, in[1]); },
                    {xt, gindex.to(kInt32)}));

    // scatter_add w.r.t. self and src; src (3, 4) larger than index.
    Tensor src = leaf({3, 4});
    Tensor sindex = dim == 0 ? tensor<int64_t>({2, 0, 1, 2, 2, 1}, {2, 3})
                             : tensor<int64_t>({1, 1, 3, 0, 2, 2, 3, 3, 3}, {3, 3});
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].scatter_add(dim, in[1], in[2]); },
                    {x, sindex, src}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) {
            return in[0].t().scatter_add(dim, in[1], in[2].t());
          }, {xt, sindex.to(kInt32), leaf({4, 3})}));
  }
}

TEST_CASE("tril, triu and embedding pass gradcheck", "[index]") {
  Tensor x = leaf({2, 3, 4});
  for (int64_t k : {-1, 0, 2}) {
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].tril(k); }, {x}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].triu(k); }, {x}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].transpose(0, 2).triu(k); }, {x}));
  }
  Tensor weight = leaf({5, 3});
  Tensor indices = tensor<int64_t>({1, 4, 1, 0, 4, 4}, {3, 2});
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); }, {weight, indices}));
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0].t(), in[1]); },
                  {leaf({3, 5}), indices.to(kInt32)}));
  // padding_idx = 2 is not looked up here, so the numerical gradient agrees.
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], in[1], 2); },
                  {weight, indices}));
}

// ---- errors -------------------------------------------------------------------------------------

TEST_CASE("indexing ops reject out-of-range indices naming the op, the index and the range", "[index]") {
  Tensor x = random_nonzero({2, 5});
  require_throws_with<IndexError>([&] { x.index_select(1, tensor<int64_t>({0, 7, 1})); },
                                  {"index_select", "7", "[0, 5)", "(2, 5)"});
  require_throws_with<IndexError>([&] { x.index_select(0, tensor<int32_t>({-1})); },
                                  {"index_select", "-1", "[0, 2)"});
  require_throws_with<IndexError>([&] { x.gather(1, tensor<int64_t>({0, 5}, {1, 2})); },
                                  {"gather", "5", "[0, 5)"});
  require_throws_with<IndexError>([&] { x.gather(0, tensor<int32_t>({0, -3}, {1, 2})); },
                                  {"gather", "-3", "[0, 2)"});
  require_throws_with<IndexError>([&] { x.scatter_add(0, tensor<int64_t>({2}, {1, 1}), x); },
                                  {"scatter_add", "2", "[0, 2)"});
  require_throws_with<IndexError>([&] { embedding(x, tensor<int64_t>({1, 2})); },
                                  {"embedding", "2", "[0, 2)"});
  require_throws_with<IndexError>([&] { one_hot(tensor<int64_t>({1, -1})); }, {"one_hot", "-1"});
  require_throws_with<IndexError>([&] { one_hot(tensor<int64_t>({1, 3}), 3); },
                                  {"one_hot", "3", "[0, 3)"});
  require_throws_with<IndexError>([&] { kernels::check_indices(tensor<int32_t>({0, 9}), 4, "myop"); },
                                  {"myop", "9", "[0, 4)"});
  require_throws_with<IndexError>([&] { x.index_select(2, tensor<int64_t>({0})); }, {"index_select", "2"});
  require_throws_with<IndexError>([&] { x.gather(-3, tensor<int64_t>({0}, {1, 1})); }, {"gather", "-3"});
}

TEST_CASE("indexing ops reject non-integer index dtypes", "[index]") {
  Tensor x = random_nonzero({2, 3});
  require_throws_with<DTypeError>([&] { x.index_select(0, tensor<float>({0.f})); },
                                  {"index_select", "float32"});
  require_throws_with<DTypeError>([&] { x.gather(0, zeros({1, 1}, kBool)); }, {"gather", "bool"});
  require_throws_with<DTypeError>([&] { x.scatter_add(0, zeros({1, 1}, kFloat64), x); },
                                  {"scatter_add", "float64"});
  require_throws_with<DTypeError>([&] { embedding(x, zeros({2}, kFloat16)); }, {"embedding", "float16"});
  require_throws_with<DTypeError>([&] { one_hot(zeros({2})); }, {"one_hot", "float32"});
  require_throws_with<DTypeError>([&] { kernels::check_indices(zeros({2}), 3, "myop"); }, {"myop", "float32"});
  require_throws_with<DTypeError>([&] { x.scatter_add(0, zeros({1, 1}, kInt64), x.to(kFloat64)); },
                                  {"scatter_add", "float32", "float64"});
}

TEST_CASE("indexing ops reject mismatched shapes naming them", "[index]") {
  Tensor x = random_nonzero({2, 3});
  require_throws_with<ShapeError>([&] { x.gather(1, zeros({2, 3, 1}, kInt64)); },
                                  {"gather", "(2, 3, 1)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { x.gather(1, zeros({3, 1}, kInt64)); },
                                  {"gather", "(3, 1)", "(2, 3)", "dim 0"});
  require_throws_with<ShapeError>([&] { x.scatter_add(0, zeros({1, 4}, kInt64), random_nonzero({2, 4})); },
                                  {"scatter_add", "(1, 4)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { x.scatter_add(0, zeros({2, 3}, kInt64), random_nonzero({2, 2})); },
                                  {"scatter_add", "(2, 3)", "(2, 2)"});
  require_throws_with<ShapeError>([&] { x.scatter_add(0, zeros({2, 3}, kInt64), random_nonzero({6})); },
                                  {"scatter_add", "(2, 3)", "(6,)"});
  require_throws_with<ShapeError>([&] { x.index_select(0, zeros({2, 1}, kInt64)); },
                                  {"index_select", "(2, 1)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { random_nonzero({5}).tril(); }, {"tril", "(5,)"});
  require_throws_with<ShapeError>([&] { random_nonzero({5}).triu(1); }, {"triu", "(5,)"});
  require_throws_with<ShapeError>([&] { embedding(random_nonzero({5}), zeros({2}, kInt64)); },
                                  {"embedding", "(5,)"});
  require_throws_with<ValueError>([&] { embedding(x, zeros({2}, kInt64), 2); }, {"embedding", "2", "(2, 3)"});
  require_throws_with<ValueError>([&] { one_hot(empty({0}, kInt64)); }, {"one_hot", "(0,)"});
  require_throws_with<ValueError>([&] { one_hot(zeros({2}, kInt64), -2); }, {"one_hot", "-2"});
}
