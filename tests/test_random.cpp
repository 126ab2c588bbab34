// Random numbers: reproducibility under manual_seed, the distributions' statistics on 1e5
// samples (tolerances of about 5 standard errors), randint/bernoulli/randperm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "test_util.h"

#include "kernels/cuda/philox_args.h"
#include "kernels/math/random_math.h"

using namespace loom;
using namespace loom::test;

namespace {

constexpr int64_t kSamples = 100000;

struct Moments {
  double mean = 0, var = 0, min = INFINITY, max = -INFINITY;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= double(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= double(v.size() - 1);
  return m;
}

// Correlation of neighbouring samples: near 0 for independent draws.
double lag1_correlation(const std::vector<double>& v) {
  Moments m = moments(v);
  double c = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) c += (v[i] - m.mean) * (v[i + 1] - m.mean);
  return c / double(v.size() - 1) / m.var;
}

// The share of samples for which pred holds.
double fraction(const std::vector<double>& v, const std::function<bool(double)>& pred) {
  return double(std::count_if(v.begin(), v.end(), pred)) / double(v.size());
}

}  // namespace

TEST_CASE("manual_seed makes random factories reproducible", "[core]") {
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    manual_seed(42);
    std::vector<double> a = rand({1000}, dt).to_vector<double>();
    std::vector<double> an = randn({7, 11}, dt).to_vector<double>();
    std::vector<double> next = rand({1000}, dt).to_vector<double>();
    manual_seed(42);
    CHECK(rand({1000}, dt).to_vector<double>() == a);
    CHECK(randn({7, 11}, dt).to_vector<double>() == an);
    CHECK(a != next);  // the generator moved on
    manual_seed(43);
    CHECK(rand({1000}, dt).to_vector<double>() != a);
  }
  manual_seed(7);
  std::vector<int64_t> ri = randint(0, 1000, {100}).to_vector<int64_t>();
  std::vector<int64_t> rp = randperm(50).to_vector<int64_t>();
  std::vector<double> be = bernoulli({100}, 0.5).to_vector<double>();
  manual_seed(7);
  CHECK(randint(0, 1000, {100}).to_vector<int64_t>() == ri);
  CHECK(randperm(50).to_vector<int64_t>() == rp);
  CHECK(bernoulli({100}, 0.5).to_vector<double>() == be);
  manual_seed(8);
  CHECK(randint(0, 1000, {100}).to_vector<int64_t>() != ri);
  CHECK(randperm(50).to_vector<int64_t>() != rp);
}

TEST_CASE("generator state: seed, offset, set_state", "[core]") {
  Generator& g = default_generator();
  manual_seed(5);
  CHECK(g.seed() == 5);
  CHECK(g.offset() == 0);
  Tensor a = rand({10});
  CHECK(g.offset() > 0);
  const uint64_t after = g.offset();
  Tensor b = rand({10});
  g.set_state(5, after);
  CHECK(rand({10}).to_vector<double>() == b.to_vector<double>());
  g.set_state(5, 0);
  CHECK(rand({10}).to_vector<double>() == a.to_vector<double>());
  // reseeds() counts every seeding, even to the same seed (cuDNN's dropout states follow it),
  // and drawing numbers does not change it.
  const uint64_t reseeds = g.reseeds();
  (void)rand({10});
  CHECK(g.reseeds() == reseeds);
  manual_seed(5);
  g.set_state(5, 0);
  CHECK(g.reseeds() == reseeds + 2);
}

TEST_CASE("generator rewind: a capture's counters go back only if nobody reserved more", "[core]") {
  Generator g(11);
  const uint64_t start = g.reserve(3);  // 0
  const uint64_t end = start + 3 + g.reserve(5) - 3;  // offset after both: 8
  REQUIRE(g.offset() == 8);
  const uint64_t reseeds = g.reseeds();
  REQUIRE_FALSE(g.rewind(end + 1, 3));  // not at that offset: untouched
  REQUIRE(g.offset() == 8);
  REQUIRE_FALSE(g.rewind(8, 9));  // forward is not a rewind
  REQUIRE(g.rewind(8, 3));
  REQUIRE(g.offset() == 3);
  REQUIRE(g.reserve(5) == 3);  // the same counters again
  REQUIRE(g.reseeds() == reseeds);  // not a reseed: cuDNN's dropout states stay
  REQUIRE(g.seed() == 11);
}

TEST_CASE("graph-safe Philox arguments: given ones eagerly, the graph's words plus the offset when captured",
          "[core]") {
  const cuda::PhiloxArgs eager{.seed = 42, .offset = 17};
  REQUIRE(eager.key() == 42);
  REQUIRE(eager.counter() == 17);
  const uint64_t words[2] = {7, 1000};  // as a replay writes them: {seed, base}
  const cuda::PhiloxArgs captured{.seed = 42, .offset = 17, .graph_state = words};
  REQUIRE(captured.key() == 7);
  REQUIRE(captured.counter() == 1017);
  // What the kernel then draws equals the eager draw at that seed and counter.
  REQUIRE(Philox::block(captured.key(), captured.counter()) == Philox::block(7, 1017));
}

TEST_CASE("random numbers do not depend on the thread count", "[core]") {
  const int threads = get_num_threads();
  manual_seed(11);
  set_num_threads(1);
  std::vector<double> one = rand({3, 70000}).to_vector<double>();
  manual_seed(11);
  set_num_threads(2);
  std::vector<double> two = rand({3, 70000}).to_vector<double>();
  set_num_threads(threads);
  CHECK(one == two);
}

TEST_CASE("random fills: element i gets words_of(i)'s words, for any split into ranges", "[core]") {
  // The CPU fill draws one Philox block for each pair of elements; a range may start at an
  // odd element. Each value must be the per-element formula on words_of(i).
  const int threads = get_num_threads();
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    for (int64_t n : {int64_t(1), int64_t(2), int64_t(7), int64_t(3 * 4096 + 1)}) {
      INFO(t << " threads, " << n << " elements");
      manual_seed(13);
      const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
      const std::vector<float> got = rand({n}, kFloat32).to_vector<float>();
      const Tensor keep = bernoulli({n}, 0.7, kFloat64);  // the next stream: blocks_for(n) further on
      const uint64_t keep_offset = offset + uint64_t(n) / 2 + uint64_t(n) % 2;
      const std::vector<double> kept = keep.to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        const auto [w0, w1] = kernels::random_math::words_of(i, seed, offset);
        REQUIRE(got[size_t(i)] == kernels::random_math::uniform_value<float>(w0, w1, 0.0, 1.0));
        const uint32_t k0 = kernels::random_math::words_of(i, seed, keep_offset).first;
        REQUIRE(kept[size_t(i)] == (kernels::random_math::bernoulli_value(k0, 0.7) ? 1.0 : 0.0));
      }
    }
  }
  set_num_threads(threads);
}

TEST_CASE("uniform: range, mean, variance, independence", "[core]") {
  manual_seed(123);
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    std::vector<double> v = rand({kSamples}, dt).to_vector<double>();
    Moments m = moments(v);
    CHECK(m.min >= 0.0);
    CHECK(m.max < 1.0);  // [0, 1), also after rounding to 16 bits
    CHECK(std::abs(m.mean - 0.5) < 5 * std::sqrt(1.0 / 12 / kSamples));
    CHECK(std::abs(m.var - 1.0 / 12) < 0.003);
    CHECK(std::abs(lag1_correlation(v)) < 0.02);
    CHECK(std::abs(fraction(v, [](double x) { return x < 0.25; }) - 0.25) < 0.007);

    Tensor t = empty({kSamples}, dt);
    const uint64_t version = t.version();
    t.uniform_(-2.0, 3.0);
    CHECK(t.version() > version);
    Moments u = moments(t.to_vector<double>());
    CHECK(u.min >= -2.0);
    CHECK(u.max < 3.0);
    CHECK(std::abs(u.mean - 0.5) < 5 * std::sqrt(25.0 / 12 / kSamples));
    CHECK(std::abs(u.var - 25.0 / 12) < 0.06);
  }
  // A non-contiguous tensor is filled everywhere.
  Tensor base = full({40, 30}, -5.0, kFloat64);
  Tensor view = base.t();
  view.uniform_(1.0, 2.0);
  Moments mv = moments(base.to_vector<double>());
  CHECK(mv.min >= 1.0);
  CHECK(mv.max < 2.0);

  require_throws_with<ValueError>([] { empty({3}).uniform_(2.0, 1.0); }, {"uniform_", "2", "1"});
  require_throws_with<DTypeError>([] { empty({3}, kInt64).uniform_(); }, {"uniform_", "int64"});
}

TEST_CASE("normal: mean, standard deviation, shape", "[core]") {
  manual_seed(321);
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    std::vector<double> v = randn({kSamples}, dt).to_vector<double>();
    Moments m = moments(v);
    CHECK(std::abs(m.mean) < 5 / std::sqrt(double(kSamples)));
    CHECK(std::abs(std::sqrt(m.var) - 1.0) < 0.012);
    CHECK(std::abs(lag1_correlation(v)) < 0.02);
    CHECK(fraction(v, [](double x) { return !std::isfinite(x); }) == 0.0);
    // The share within one and two standard deviations (68.27%, 95.45%).
    CHECK(std::abs(fraction(v, [](double x) { return std::abs(x) < 1; }) - 0.6827) < 0.008);
    CHECK(std::abs(fraction(v, [](double x) { return std::abs(x) < 2; }) - 0.9545) < 0.005);

    Tensor t = empty({kSamples}, dt);
    t.normal_(3.0, 0.5);
    Moments n = moments(t.to_vector<double>());
    CHECK(std::abs(n.mean - 3.0) < 5 * 0.5 / std::sqrt(double(kSamples)) + 0.01);
    CHECK(std::abs(std::sqrt(n.var) - 0.5) < 0.01);
  }
  Tensor z = empty({100}).normal_(2.0, 0.0);
  CHECK(z.to_vector<double>() == std::vector<double>(100, 2.0));
  CHECK(randn({2, 3}, TensorOptions(kFloat64).requires_grad()).requires_grad());
  require_throws_with<ValueError>([] { empty({3}).normal_(0.0, -1.0); }, {"normal_", "-1"});
  require_throws_with<DTypeError>([] { empty({3}, kInt32).normal_(); }, {"normal_", "int32"});
}

TEST_CASE("randint: range and uniform frequencies", "[core]") {
  manual_seed(99);
  Tensor r = randint(-3, 7, {kSamples});
  CHECK(r.dtype() == kInt64);
  std::map<int64_t, int64_t> counts;
  for (int64_t x : r.to_vector<int64_t>()) counts[x]++;
  CHECK(counts.size() == 10);
  CHECK(counts.begin()->first == -3);
  CHECK(counts.rbegin()->first == 6);
  for (auto [value, count] : counts) {
    INFO("value " << value);
    CHECK(std::abs(double(count) / kSamples - 0.1) < 0.005);
  }
  Tensor r32 = randint(0, 2, {1000}, kInt32);
  CHECK(r32.dtype() == kInt32);
  for (int32_t x : r32.to_vector<int32_t>()) CHECK((x == 0 || x == 1));
  Tensor rf = randint(5, 6, {10}, kFloat32);
  CHECK(rf.to_vector<double>() == std::vector<double>(10, 5.0));
  require_throws_with<ValueError>([] { randint(3, 3, {2}); }, {"randint", "[3, 3)"});
}

TEST_CASE("randint: ranges at the ends of int64", "[core]") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  // The widest ranges it draws from: INT64_MAX values.
  for (int64_t x : randint(kMin, -1, {1000}).to_vector<int64_t>()) CHECK((x >= kMin && x < -1));
  for (int64_t x : randint(0, kMax, {1000}).to_vector<int64_t>()) CHECK((x >= 0 && x < kMax));
  CHECK(randint(kMax - 1, kMax, {3}).to_vector<int64_t>() == std::vector<int64_t>(3, kMax - 1));
  // high - low overflows int64: a ValueError, not a wrapped range.
  require_throws_with<ValueError>([&] { randint(kMin, kMax, {2}); }, {"randint", "2^63 - 1 values"});
  require_throws_with<ValueError>([&] { randint(-1, kMax, {2}); }, {"randint", "[-1, 9223372036854775807)"});
  require_throws_with<ValueError>([&] { randint(kMin, 1, {2}); }, {"randint"});
}

TEST_CASE("bernoulli: rate and per-element probabilities", "[core]") {
  manual_seed(2024);
  for (DType dt : float_dtypes()) {
    INFO(dtype_name(dt));
    Tensor b = bernoulli({kSamples}, 0.3, dt);
    CHECK(b.dtype() == dt);
    std::vector<double> v = b.to_vector<double>();
    CHECK(fraction(v, [](double x) { return x == 0.0 || x == 1.0; }) == 1.0);
    CHECK(std::abs(moments(v).mean - 0.3) < 5 * std::sqrt(0.3 * 0.7 / kSamples));
  }
  // p per element: 0 and 1 are certain, 0.5 in between.
  Tensor p = from_vector(std::vector<double>{0.0, 1.0, 0.5}).reshape({1, 3}).expand({20000, 3});
  std::vector<double> v = bernoulli(p).to_vector<double>();
  double zeros_at_0 = 0, ones_at_1 = 0, ones_at_2 = 0;
  for (size_t i = 0; i < v.size(); i += 3) {
    zeros_at_0 += v[i] == 0.0;
    ones_at_1 += v[i + 1] == 1.0;
    ones_at_2 += v[i + 2];
  }
  CHECK(zeros_at_0 == 20000);
  CHECK(ones_at_1 == 20000);
  CHECK(std::abs(ones_at_2 / 20000 - 0.5) < 0.02);
  require_throws_with<ValueError>([] { bernoulli({2}, 1.5); }, {"bernoulli", "1.5"});
  require_throws_with<ValueError>([] { bernoulli(full({2}, -0.25)); }, {"bernoulli", "-0.25"});
  require_throws_with<DTypeError>([] { bernoulli(ones({2}, kInt64)); }, {"bernoulli", "int64"});
}

TEST_CASE("randperm is a permutation", "[core]") {
  manual_seed(5);
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    INFO("n = " << n);
    Tensor p = randperm(n);
    CHECK(p.dtype() == kInt64);
    CHECK(p.sizes() == Shape{n});
    std::vector<int64_t> v = p.to_vector<int64_t>();
    std::sort(v.begin(), v.end());
    std::vector<int64_t> identity(static_cast<size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    CHECK(v == identity);
  }
  // Not the identity, and position 0 takes many values over seeds.
  std::vector<int64_t> p = randperm(1000).to_vector<int64_t>();
  int64_t fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += p[size_t(i)] == i;
  CHECK(fixed < 10);
  std::map<int64_t, int> first;
  for (int s = 0; s < 200; ++s) {
    manual_seed(uint64_t(s));
    first[randperm(4).to_vector<int64_t>()[0]]++;
  }
  CHECK(first.size() == 4);
  for (auto [value, count] : first) CHECK(count > 25);  // about 50 each
  CHECK(randperm(5, kInt32).dtype() == kInt32);
  require_throws_with<ValueError>([] { randperm(-1); }, {"randperm", "-1"});
}
