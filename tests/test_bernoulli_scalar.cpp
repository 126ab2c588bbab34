// Bernoulli with one scalar probability (kernels::bernoulli(dst, double p, ...) and the
// factory bernoulli(shape, p, options) that dropout uses): the same numbers, bit for bit,
// as the tensor-probability version holding p everywhere, on the CPU and on a GPU; p
// rounded to the output dtype as a probability tensor would hold it; invalid p rejected.
#include <limits>

#include "cuda_test_util.h"
#include "test_util.h"

#include "kernels/kernels.h"
#include "kernels/math/random_math.h"
#include "nn/functional.h"

using namespace loom;
using namespace loom::test;

namespace {

// Sizes that are not multiples of 4 (a Philox block) or 16 (a vector of halves).
const std::vector<int64_t> kSizes{1, 3, 5, 17, 255, 1001, 4099};
const std::vector<double> kProbabilities{0.0, 1e-3, 1.0 / 3, 0.5, 0.9, 1.0};

void require_same(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  REQUIRE(got.to_vector<double>() == want.to_vector<double>());
}

}  // namespace

TEST_CASE("bernoulli kernel: a scalar p equals a tensor of p, element for element", "[core][bernoulli]") {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool}) {
    for (int64_t n : kSizes) {
      for (double p : kProbabilities) {
        INFO(dtype_name(dt) << ", n = " << n << ", p = " << p);
        const uint64_t seed = 1234 + uint64_t(n), offset = 7;  // an odd first block
        Tensor got = empty({n}, dt), want = empty({n}, dt);
        kernels::bernoulli(got, p, seed, offset);
        kernels::bernoulli(want, full({n}, p, kFloat64), seed, offset);
        require_same(got, want);
        const std::vector<double> v = got.to_vector<double>();
        if (p == 0.0) CHECK(std::count(v.begin(), v.end(), 0.0) == n);
        if (p == 1.0) CHECK(std::count(v.begin(), v.end(), 1.0) == n);
      }
    }
  }
  // A strided destination gets the row-major element order of a contiguous one.
  Tensor strided = empty({23, 41}).t(), contiguous = empty({41, 23});
  kernels::bernoulli(strided, 0.3, 5, 2);
  kernels::bernoulli(contiguous, 0.3, 5, 2);
  require_same(strided.contiguous(), contiguous);
}

TEST_CASE("bernoulli factory: a scalar p draws what bernoulli(full(shape, p)) draws", "[core][bernoulli]") {
  for (DType dt : float_dtypes()) {
    for (int64_t n : kSizes) {
      for (double p : {0.1, 1.0 / 3, 0.7, 0.9}) {  // none exactly representable in binary
        INFO(dtype_name(dt) << ", n = " << n << ", p = " << p);
        manual_seed(uint64_t(n));
        Tensor got = bernoulli({n}, p, dt);
        const double next_got = rand({1}, kFloat64).item<double>();
        manual_seed(uint64_t(n));
        Tensor want = bernoulli(full({n}, p, dt));
        const double next_want = rand({1}, kFloat64).item<double>();
        require_same(got, want);
        CHECK_FALSE(got.requires_grad());
        CHECK(next_got == next_want);  // both reserved the same generator counters
      }
    }
  }
}

TEST_CASE("bernoulli factory: p is compared as the output dtype holds it", "[core][bernoulli]") {
  // An element whose uniform draw u equals float(p) exactly, with p itself above u: against
  // the double p it would be 1, against the float32 p a probability tensor holds it is 0.
  manual_seed(2024);
  const Generator& g = default_generator();
  const uint32_t w0 = kernels::random_math::words_of(0, g.seed(), g.offset()).first;
  const float u = Philox::to_unit_float(w0);
  const double p = double(u) + double(std::nextafter(u, 2.0f) - u) / 4;
  REQUIRE(float(p) == u);
  REQUIRE(double(u) < p);
  REQUIRE(u < 1.0f);
  CHECK(bernoulli({1}, p, kFloat32).item<double>() == 0.0);
  manual_seed(2024);
  CHECK(bernoulli({1}, p, kFloat64).item<double>() == 1.0);
  manual_seed(2024);
  CHECK(bernoulli(full({1}, p, kFloat32)).item<double>() == 0.0);
}

TEST_CASE("dropout draws the same mask as before the scalar bernoulli", "[nn][bernoulli]") {
  for (DType dt : {kFloat32, kBFloat16}) {
    for (double p : {0.1, 0.5}) {
      INFO(dtype_name(dt) << ", p = " << p);
      Tensor x = random_nonzero({37, 19}, dt);
      manual_seed(11);
      Tensor got = nn::functional::dropout(x, p, /*training=*/true);
      manual_seed(11);
      Tensor keep = bernoulli(full(x.sizes(), 1.0 - p, x.options()));  // the old mask
      require_same(got, x * (keep / (1.0 - p)));
    }
  }
}

TEST_CASE("bernoulli with a scalar p rejects p outside [0, 1]", "[core][bernoulli]") {
  Tensor dst = empty({8});
  for (double bad : {1.5, -0.25, std::numeric_limits<double>::quiet_NaN()}) {
    INFO("p = " << bad);
    require_throws_with<ValueError>([&] { kernels::bernoulli(dst, bad, 1, 0); }, {"bernoulli", "p must be"});
    require_throws_with<ValueError>([&] { bernoulli({8}, bad); }, {"bernoulli", "p must be"});
  }
  require_throws_with<ValueError>([&] { kernels::bernoulli(dst, 1.5, 1, 0); }, {"1.5"});
  require_throws_with<DTypeError>([] { bernoulli({2}, 0.5, kInt64); }, {"bernoulli", "int64"});
}

TEST_CASE("cuda: bernoulli with a scalar p equals the CPU's", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64, kBool}) {
    for (int64_t n : {int64_t(1), int64_t(17), int64_t(4099), int64_t(1000003)}) {
      for (double p : {0.0, 0.25, 0.9, 1.0}) {
        INFO(dtype_name(dt) << ", n = " << n << ", p = " << p);
        Tensor cpu = empty({n}, dt);
        kernels::bernoulli(cpu, p, 99, 13);
        // The GPU output poisoned first, so an element the kernel misses fails: with 7
        // (neither 0 nor 1), or for bool with each value in turn.
        for (int poison : dt == kBool ? std::vector<int>{0, 1} : std::vector<int>{7}) {
          Tensor gpu = full({n}, poison, TensorOptions(dt).device(kCUDA));
          kernels::bernoulli(gpu, p, 99, 13);
          REQUIRE(gpu.is_cuda());
          require_same(gpu.cpu(), cpu);
        }
      }
    }
  }
  // Strided, and through the factory.
  Tensor cpu = empty({23, 41}).t(), gpu = empty({23, 41}, TensorOptions().device(kCUDA)).t();
  kernels::bernoulli(cpu, 0.3, 5, 2);
  kernels::bernoulli(gpu, 0.3, 5, 2);
  require_same(gpu.cpu(), cpu);
  manual_seed(3);
  Tensor c = bernoulli({1001}, 0.9, kFloat32);
  manual_seed(3);
  Tensor g = bernoulli({1001}, 0.9, TensorOptions(kFloat32).device(kCUDA));
  require_same(g.cpu(), c);
  require_throws_with<ValueError>([&] { kernels::bernoulli(gpu, 2.0, 1, 0); }, {"bernoulli", "p must be"});
}
