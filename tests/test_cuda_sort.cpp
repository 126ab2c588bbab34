// The CUDA sort/topk and multinomial kernels (kernels/cuda/sort.cu, multinomial.cu)
// against the CPU: every dtype, ties and NaNs, rows through shared memory and through the
// global scratch path, non-contiguous inputs, the values' gradient on the GPU, and the same
// draws as the CPU for the same seed. "[.cuda]": they skip themselves without a GPU.
#include "catch2_compat.h"

#include "core/generator.h"
#include "tests/cuda_test_util.h"
#include "tests/sort_reference.h"
#include "tests/test_util.h"

using namespace loom;
using namespace loom::test;

TEST_CASE("cuda sort: sort and topk equal the CPU for every dtype, dim and row length", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(21);
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool}) {
    // Row lengths 1, 7 (padded), 1000, and 5000 (float64: past shared memory, the global path).
    for (const Shape& shape : std::vector<Shape>{{3, 1}, {4, 7, 5}, {3, 1000}, {2, 5000}}) {
      const Tensor x = tied_values(shape, dtype);
      const Tensor gx = x.to(kCUDA);
      for (int64_t dim = 0; dim < x.dim(); ++dim) {
        for (bool descending : {false, true}) {
          INFO(dtype_name(dtype) << " " << shape_str(shape) << " dim " << dim << " descending " << descending);
          const auto [v, i] = x.sort(dim, descending);
          const auto [gv, gi] = gx.sort(dim, descending);
          REQUIRE(gv.is_cuda());
          REQUIRE(gi.cpu().to_vector<int64_t>() == i.to_vector<int64_t>());
          REQUIRE(same_values(gv.cpu().to_vector<double>(), v.to_vector<double>()));
          const int64_t k = std::min<int64_t>(3, x.size(dim));
          const auto [tv, ti] = x.topk(k, dim, descending);
          const auto [gtv, gti] = gx.topk(k, dim, descending);
          REQUIRE(gti.cpu().to_vector<int64_t>() == ti.to_vector<int64_t>());
          REQUIRE(same_values(gtv.cpu().to_vector<double>(), tv.to_vector<double>()));
        }
      }
    }
  }
}

TEST_CASE("cuda sort: many rows, non-contiguous inputs, empty dims and the gradient", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(22);
  const Tensor x = randn({300, 40, 3});
  const Tensor gx = x.to(kCUDA);
  REQUIRE(gx.transpose(0, 2).argsort(1).cpu().to_vector<int64_t>() == x.transpose(0, 2).argsort(1).to_vector<int64_t>());
  REQUIRE(gx.topk(5, 0).second.cpu().to_vector<int64_t>() == x.topk(5, 0).second.to_vector<int64_t>());
  REQUIRE(zeros({3, 0}, TensorOptions().device(kCUDA)).sort(1).first.sizes() == Shape{3, 0});
  REQUIRE(zeros({4, 6}, TensorOptions().device(kCUDA)).topk(0).first.sizes() == Shape{4, 0});
  const Tensor a = randn({6, 9}, kFloat64);
  const Tensor ga = a.to(kCUDA).requires_grad_(true);
  ga.topk(4, 1).first.sum().backward();
  const Tensor ca = a.clone().requires_grad_(true);
  ca.topk(4, 1).first.sum().backward();
  REQUIRE(ga.grad().cpu().to_vector<double>() == ca.grad().to_vector<double>());
}

TEST_CASE("cuda multinomial: the GPU draws what the CPU draws for the same seed", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(23);
  for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
    INFO(dtype_name(dtype));
    const Tensor w = (rand({64, 300}) * (rand({64, 300}) > 0.3).to(kFloat32) + 1e-4).to(dtype);
    Generator g1(5), g2(5);
    const Tensor with = multinomial(w, 200, true, &g1);
    const Tensor without = multinomial(w, 50, false, &g1);
    const Tensor gw = w.to(kCUDA);
    const Tensor gwith = multinomial(gw, 200, true, &g2);
    const Tensor gwithout = multinomial(gw, 50, false, &g2);
    REQUIRE(gwith.is_cuda());
    REQUIRE(gwith.cpu().to_vector<int64_t>() == with.to_vector<int64_t>());
    REQUIRE(gwithout.cpu().to_vector<int64_t>() == without.to_vector<int64_t>());
    REQUIRE(g1.offset() == g2.offset());
  }
  REQUIRE_THROWS_AS(multinomial(tensor({1.0, -1.0}).to(kCUDA), 1), ValueError);
  REQUIRE_THROWS_AS(multinomial(zeros({2, 3}).to(kCUDA), 1, true), ValueError);
  REQUIRE_THROWS_AS(multinomial(tensor({1.0, 0.0}).to(kCUDA), 2), ValueError);
}
