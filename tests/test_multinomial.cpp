// multinomial (kernels/factories.cpp, kernels/cpu/multinomial.cpp): the same seed gives
// the same draws, the frequencies match the weights (a chi-square bound on a large sample
// with a fixed seed, so deterministic), draws without replacement are distinct, zero
// weights are never drawn, PyTorch's errors, and the emulated cuda:0 draws what the CPU
// does.
#include "catch2_compat.h"

#include <cmath>
#include <limits>
#include <set>

#include "core/cuda_emulation.h"
#include "core/generator.h"
#include "tests/test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

// Pearson's statistic of the counts of draws against weights w (not normalised).
double chi_square(const std::vector<int64_t>& draws, const std::vector<double>& w) {
  std::vector<double> counts(w.size(), 0.0);
  for (int64_t d : draws) counts.at(size_t(d)) += 1;
  double total = 0;
  for (double x : w) total += x;
  double stat = 0;
  for (size_t c = 0; c < w.size(); ++c) {
    const double expected = double(draws.size()) * w[c] / total;
    stat += (counts[c] - expected) * (counts[c] - expected) / expected;
  }
  return stat;
}

}  // namespace

TEST_CASE("multinomial: the same seed gives the same draws, and shapes as PyTorch", "[multinomial]") {
  const Tensor w = tensor({1.0f, 2.0f, 0.5f, 3.0f, 0.25f});
  manual_seed(3);
  const Tensor a = multinomial(w, 4);
  const Tensor a2 = multinomial(w, 4);  // the generator moved on
  manual_seed(3);
  const Tensor b = w.multinomial(4);
  REQUIRE(a.sizes() == Shape{4});
  REQUIRE(a.dtype() == kInt64);
  REQUIRE(a.to_vector<int64_t>() == b.to_vector<int64_t>());
  REQUIRE(a.to_vector<int64_t>() != a2.to_vector<int64_t>());
  // An explicit generator, apart from the global one.
  Generator g1(11), g2(11);
  const Tensor rows = rand({6, 9}) + 0.1;
  const Tensor c = multinomial(rows, 20, true, &g1);
  REQUIRE(c.sizes() == Shape{6, 20});
  REQUIRE(c.to_vector<int64_t>() == multinomial(rows, 20, true, &g2).to_vector<int64_t>());
  REQUIRE(multinomial(rows, 9, false, &g1).sizes() == Shape{6, 9});
  // The weights' dtype does not matter beyond its rounding.
  Generator g3(5), g4(5);
  REQUIRE(multinomial(w.to(kFloat64), 3, true, &g3).to_vector<int64_t>() ==
          multinomial(w.to(kBFloat16), 3, true, &g4).to_vector<int64_t>());
}

TEST_CASE("multinomial: frequencies follow the weights, with and without replacement", "[multinomial]") {
  const std::vector<double> w{1, 2, 3, 4, 0, 6};
  const Tensor weights = from_vector(w);
  Generator g(2024);
  const std::vector<int64_t> with = multinomial(weights, 60000, true, &g).to_vector<int64_t>();
  for (int64_t d : with) REQUIRE(d != 4);  // a zero weight is never drawn
  const std::vector<double> nonzero{1, 2, 3, 4, 6};
  std::vector<int64_t> shifted;
  for (int64_t d : with) shifted.push_back(d > 4 ? d - 1 : d);
  // 4 degrees of freedom: P(chi^2 > 18.47) = 0.001.
  CHECK(chi_square(shifted, nonzero) < 18.47);
  // Without replacement, the first draw of each row follows the weights too.
  const Tensor first = multinomial(weights.unsqueeze(0).expand({40000, 6}), 1, false, &g);
  REQUIRE(first.sizes() == Shape{40000, 1});
  shifted.clear();
  for (int64_t d : first.to_vector<int64_t>()) {
    REQUIRE(d != 4);
    shifted.push_back(d > 4 ? d - 1 : d);
  }
  CHECK(chi_square(shifted, nonzero) < 18.47);
  // The second draw without replacement: P(second = j | first = i) = w_j / (1 - w_i), so
  // P(second = 0) = sum_i p_i p_0 / (1 - p_i) with p = w / 16.
  const std::vector<int64_t> two = multinomial(weights.unsqueeze(0).expand({40000, 6}), 2, false, &g).to_vector<int64_t>();
  double expected = 0;
  for (size_t i = 1; i < w.size(); ++i) expected += (w[i] / 16) * (w[0] / 16) / (1 - w[i] / 16);
  int64_t zeros_second = 0;
  for (size_t r = 0; r < two.size(); r += 2) zeros_second += two[r + 1] == 0;
  CHECK(std::abs(double(zeros_second) / 40000 - expected) < 4 * std::sqrt(expected / 40000));
}

TEST_CASE("multinomial: without replacement the indices of a row are distinct", "[multinomial]") {
  Generator g(77);
  const Tensor w = rand({50, 10}, kFloat64) + 0.01;
  const Tensor all = multinomial(w, 10, false, &g);
  for (int64_t r = 0; r < 50; ++r) {
    const std::vector<int64_t> row = all.select(0, r).to_vector<int64_t>();
    REQUIRE(std::set<int64_t>(row.begin(), row.end()).size() == 10);
  }
  // Exactly as many positive weights as samples: all of them, never a zero one.
  const std::vector<int64_t> some = multinomial(tensor({0.0, 3.0, 0.0, 1.0, 2.0}), 3, false, &g).to_vector<int64_t>();
  REQUIRE(std::set<int64_t>(some.begin(), some.end()) == std::set<int64_t>{1, 3, 4});
}

TEST_CASE("multinomial: invalid weights and sample counts are ValueErrors as in PyTorch", "[multinomial]") {
  const double inf = std::numeric_limits<double>::infinity();
  REQUIRE_THROWS_AS(multinomial(tensor({1.0, -0.5}), 1), ValueError);
  require_throws_with<ValueError>([&] { multinomial(tensor({1.0, 1.0, 1.0, inf}, {2, 2}), 1); },
                      {"multinomial", "row 1", "inf, NaN or a negative"});
  REQUIRE_THROWS_AS(multinomial(tensor({1.0, std::nan("")}), 1), ValueError);
  require_throws_with<ValueError>([&] { multinomial(tensor({0.0, 0.0}), 1, true); }, {"multinomial", "row 0", "sums to 0"});
  require_throws_with<ValueError>([&] { multinomial(tensor({1.0, 2.0}), 3); }, {"multinomial", "3 samples", "2 categories"});
  require_throws_with<ValueError>([&] { multinomial(tensor({1.0, 0.0, 0.0}), 2); }, {"row 0", "1 positive weights", "2 samples"});
  REQUIRE(multinomial(tensor({1.0, 2.0}), 3, true).numel() == 3);  // with replacement, fine
  REQUIRE_THROWS_AS(multinomial(tensor({1.0}), 0), ValueError);
  REQUIRE_THROWS_AS(multinomial(ones({2, 2, 2}), 1), ShapeError);
  REQUIRE_THROWS_AS(multinomial(tensor({1, 2}), 1), DTypeError);
  REQUIRE_THROWS_AS(multinomial(zeros({3, 0}), 1, true), ValueError);
  // Overflowing sums are not finite either.
  REQUIRE_THROWS_AS(multinomial(tensor({1e308, 1e308}), 1), ValueError);
}

#ifndef LOOM_WITH_CUDA
TEST_CASE("multinomial: the emulated cuda:0 draws what the CPU draws", "[multinomial][cuda_emulation]") {
  const Tensor w = rand({7, 13}) * (rand({7, 13}) > 0.2).to(kFloat32) + 1e-3;
  Generator g1(99);
  const Tensor cpu_with = multinomial(w, 30, true, &g1);
  const Tensor cpu_without = multinomial(w, 5, false, &g1);
  cuda::EmulationGuard emulate;
  Generator g2(99);
  const Tensor on_device = w.to(kCUDA);
  const Tensor gpu_with = multinomial(on_device, 30, true, &g2);
  const Tensor gpu_without = multinomial(on_device, 5, false, &g2);
  REQUIRE(gpu_with.is_cuda());
  REQUIRE(gpu_with.cpu().to_vector<int64_t>() == cpu_with.to_vector<int64_t>());
  REQUIRE(gpu_without.cpu().to_vector<int64_t>() == cpu_without.to_vector<int64_t>());
}
#endif
