// Shapes at the limits of int64: element counts, strides and byte sizes that overflow are
// typed errors (never a wrapped count, a tiny allocation and a crash), and views and
// factories given extreme arguments (INT64_MAX, INT64_MIN, huge steps, negative sizes)
// throw a typed error or give PyTorch's result. Every case here was signed overflow
// (undefined behaviour, flagged by the sanitize preset) or a wrong result before.
#include <cstdint>
#include <limits>

#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k32 = int64_t(1) << 32;
constexpr int64_t k40 = int64_t(1) << 40;

}  // namespace

TEST_CASE("element counts that overflow int64 are a ValueError naming the op and shape", "[core][limits]") {
  // 3 * 6148914691236517206 wraps to 2: an 8-byte buffer for an enormous shape.
  require_throws_with<ValueError>([] { zeros({3, 6148914691236517206}); },
                                  {"zeros", "(3, 6148914691236517206)", "overflow"});
  // 2^80 wraps to 0 elements.
  require_throws_with<ValueError>([] { zeros({k40, k40}); }, {"zeros", "(1099511627776, 1099511627776)"});
  require_throws_with<ValueError>([] { ones({k40, k40}); }, {"ones", "(1099511627776, 1099511627776)"});
  require_throws_with<ValueError>([] { empty({k32, k32}); }, {"empty", "(4294967296, 4294967296)"});
  require_throws_with<ValueError>([] { randn({k32, k32}); }, {"randn", "(4294967296, 4294967296)"});
  require_throws_with<ValueError>([] { full({k32, k32, 2}, 1.0); }, {"full", "(4294967296, 4294967296, 2)"});
  // Strides count a size-0 dim as 1: (0, 2^40, 2^40) has stride 2^80 for dim 0.
  require_throws_with<ValueError>([] { zeros({0, k40, k40}); }, {"zeros", "(0, 1099511627776, 1099511627776)"});
  // No values for 2^64 "elements" that wrapped to 0.
  require_throws_with<ValueError>([] { from_vector(std::vector<float>{}, {k32, k32}); },
                                  {"from_vector", "(4294967296, 4294967296)"});
  // The weight is (2^32, 2^32): it used to hold 0 elements and index_select then crashed.
  require_throws_with<ValueError>([] { nn::Embedding(k32, k32); }, {"(4294967296, 4294967296)"});
}

TEST_CASE("byte sizes that overflow are a ValueError, and too much memory is an OutOfMemoryError", "[core][limits]") {
  // 2^62 floats are 2^64 bytes.
  require_throws_with<ValueError>([] { empty({int64_t(1) << 62}); }, {"empty", "(4611686018427387904,)", "bytes"});
  require_throws_with<ValueError>([] { zeros({int64_t(1) << 61}, kInt64); }, {"zeros", "bytes"});
  require_throws_with<ValueError>([] { linspace(0, 1, kMax); }, {"linspace", "bytes"});
  // 2^50 int64s (8 PiB) fit the count but not the machine: std::bad_alloc before.
  require_throws_with<OutOfMemoryError>([] { arange(0, int64_t(1) << 50); },
                                        {"9007199254740992 bytes", "CPU out of memory"});
  require_throws_with<OutOfMemoryError>([] { empty({int64_t(1) << 55}, kBool); },
                                        {"36028797018963968 bytes", "CPU out of memory"});
  // What was allocated before still works.
  CHECK(ones({3}).sum().item<float>() == 3.0f);
}

TEST_CASE("views that would overflow the element count are a ValueError", "[core][limits]") {
  // Expanding (1, 1) to (2^32, 2^32): 2^64 elements wrapped to 0, and sum() gave 0.
  require_throws_with<ValueError>([] { ones({1, 1}).expand({k32, k32}); },
                                  {"expand", "(4294967296, 4294967296)"});
  require_throws_with<ValueError>([] { ones({1}).expand({int64_t(1) << 62, 4}); }, {"expand"});
  require_throws_with<ValueError>([] { ones({2, 1}) + ones({1, 1}).expand({1, kMax}); },
                                  {"(2, 9223372036854775807)"});
  // Sizes that sum or broadcast past int64 in cat and matmul.
  require_throws_with<ValueError>([] { cat({ones({1}).expand({kMax}), ones({1}).expand({kMax})}); }, {"cat"});
  require_throws_with<ValueError>(
      [] { matmul(ones({1, 1, 2, 2}).expand({k32, 1, 2, 2}), ones({1, 1, 2, 2}).expand({1, k32, 2, 2})); },
      {"matmul", "(4294967296, 4294967296"});
  // Viewing a 0-element tensor as a shape whose product wraps.
  require_throws_with<ValueError>([] { zeros({0}).view({k32, k32, 0}); }, {"view", "(4294967296, 4294967296, 0)"});
  require_throws_with<ValueError>([] { zeros({0}).reshape({-1, int64_t(1) << 62, 4}); }, {"reshape"});
  // A shape whose product wraps to the tensor's element count is not a valid view of it.
  require_throws_with<ValueError>([] { zeros({4}).view({int64_t(1) << 62, 16, 1}); }, {"view"});
  // Negative sizes other than -1 are rejected, not turned into negative shapes.
  require_throws_with<ShapeError>([] { ones({1}).expand({-2}); }, {"expand", "(-2,)"});
  require_throws_with<ShapeError>([] { ones({1}).expand({kMin, 1}); }, {"expand"});
  require_throws_with<ShapeError>([] { zeros({kMin}); }, {"zeros", "negative"});
  require_throws_with<ShapeError>([] { ones({4}).view({kMin}); }, {"view"});
}

TEST_CASE("narrow, slice, select, chunk, split with extreme arguments", "[core][limits]") {
  Tensor x = arange(0, 4, 1, kFloat32);  // 0, 1, 2, 3

  // narrow: start + length past the end is an error, also when the sum overflows.
  require_throws_with<IndexError>([&] { x.narrow(0, 1, kMax); }, {"narrow", "size 4"});
  require_throws_with<IndexError>([&] { x.narrow(0, 3, kMax); }, {"narrow"});
  require_throws_with<IndexError>([&] { x.narrow(0, kMax, 1); }, {"narrow"});
  require_throws_with<IndexError>([&] { x.narrow(0, kMin, 1); }, {"narrow"});
  require_throws_with<IndexError>([&] { x.narrow(0, 1, kMin); }, {"narrow"});
  CHECK(x.narrow(0, -1, 1).to_vector<float>() == std::vector<float>{3});

  // slice: a step larger than the dim gives one element (x[0:4:2**63-1] is [0.]).
  Tensor s = x.slice(0, 0, 4, kMax);
  CHECK(s.sizes() == Shape{1});
  CHECK(s.to_vector<float>() == std::vector<float>{0});
  CHECK(x.slice(0, 1, kMax, kMax).to_vector<float>() == std::vector<float>{1});
  CHECK(x.slice(0, 3, std::nullopt, kMax - 1).to_vector<float>() == std::vector<float>{3});
  // ... also where step * stride overflows: columns of a (2, 4) tensor have stride 1,
  // rows stride 4; the transpose slices along stride 4.
  Tensor m = arange(0, 8, 1, kFloat32).reshape({2, 4}).t();  // (4, 2), strides (1, 4)
  Tensor ms = m.slice(1, 0, std::nullopt, kMax);
  CHECK(ms.sizes() == Shape{4, 1});
  CHECK(ms.to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  CHECK(m.slice(0, 1, std::nullopt, kMax / 2).to_vector<float>() == std::vector<float>{1, 5});
  // Extreme bounds clamp, as Python slicing does.
  CHECK(x.slice(0, kMin, kMax).to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  CHECK(x.slice(0, kMin, kMin).numel() == 0);
  CHECK(x.slice(0, kMax, kMin).numel() == 0);
  CHECK(x.slice(0, -kMax, -1).to_vector<float>() == std::vector<float>{0, 1, 2});
  require_throws_with<ValueError>([&] { x.slice(0, 0, 4, kMin); }, {"slice", "step"});
  require_throws_with<ValueError>([&] { x.slice(0, 0, 4, -1); }, {"slice", "step"});

  // select: indices far out of range.
  require_throws_with<IndexError>([&] { x.select(0, kMax); }, {"select", "size 4"});
  require_throws_with<IndexError>([&] { x.select(0, kMin); }, {"select", "size 4"});
  require_throws_with<IndexError>([&] { x.select(kMin, 0); }, {"select"});
  CHECK(x.select(0, -4).item<float>() == 0.0f);

  // chunk(2^63 - 1) of 4 elements: 4 chunks of 1 (the size rounding overflowed).
  std::vector<Tensor> c = x.chunk(kMax);
  REQUIRE(c.size() == 4);
  CHECK(c[3].to_vector<float>() == std::vector<float>{3});
  require_throws_with<ValueError>([&] { x.chunk(kMin); }, {"chunk"});
  // split: a huge split_size is one part; sizes that sum past int64 are an error.
  std::vector<Tensor> p = x.split(kMax);
  REQUIRE(p.size() == 1);
  CHECK(p[0].numel() == 4);
  require_throws_with<ValueError>([&] { x.split(Dims{kMax, kMax, 6}); }, {"split"});
  require_throws_with<ValueError>([&] { x.split(Dims{-1, 5}); }, {"split", "(-1, 5)"});

  // unsqueeze and squeeze at extreme dims.
  require_throws_with<IndexError>([&] { x.unsqueeze(kMax); }, {"unsqueeze"});
  require_throws_with<IndexError>([&] { x.unsqueeze(kMin); }, {"unsqueeze"});
  require_throws_with<IndexError>([&] { x.transpose(kMin, 0); }, {"transpose"});
  require_throws_with<IndexError>([&] { x.flatten(kMin, kMax); }, {"flatten"});
}

TEST_CASE("arange with extreme integer bounds", "[core][limits]") {
  // start + i * step past int64 for the last element: computed without overflow.
  Tensor a = arange(kMin, kMax, int64_t(1) << 62);
  CHECK(a.to_vector<int64_t>() ==
        std::vector<int64_t>{kMin, -(int64_t(1) << 62), 0, int64_t(1) << 62});
  Tensor b = arange(kMax, kMin, kMin);  // kMax, then kMax + kMin = -1
  CHECK(b.to_vector<int64_t>() == std::vector<int64_t>{kMax, -1});
  CHECK(arange(kMax - 2, kMax).to_vector<int64_t>() == std::vector<int64_t>{kMax - 2, kMax - 1});
  // Too many elements for int64 or for memory.
  require_throws_with<ValueError>([] { arange(0.0, 1e30); }, {"arange"});
  require_throws_with<ValueError>([] { arange(kMin, kMax); }, {"arange"});
  require_throws_with<ValueError>([] { arange(0, kMax); }, {"arange", "bytes"});
}
