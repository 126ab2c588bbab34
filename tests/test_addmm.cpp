// bmm, baddbmm and addmm (autograd/functions/addmm.cpp) against a plain float64 loop that
// writes PyTorch's definition out (beta input + alpha product, the input broadcast, the
// input not read at beta = 0); float64 gradchecks of every operand, the broadcast input
// included; strided operands; autocast; the errors PyTorch raises; on a GPU against the CPU.
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

// beta input + alpha (a @ b) for a (B, M, K), b (B, K, N) and input of a shape that
// broadcasts to (B, M, N) (missing leading dims and size-1 dims repeat), in float64.
// beta = 0 leaves input out, as PyTorch does.
std::vector<double> reference(const Tensor& input, const Tensor& a, const Tensor& b, double beta, double alpha) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const std::vector<double> av = values(a.contiguous()), bv = values(b.contiguous());
  Tensor in3;
  if (input.defined()) {
    in3 = input;
    while (in3.dim() < 3) in3 = in3.unsqueeze(0);
  }
  std::vector<double> out;
  for (int64_t n = 0; n < B; ++n)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k) sum += av[size_t((n * M + i) * K + k)] * bv[size_t((n * K + k) * N + j)];
        double value = alpha * sum;
        if (input.defined() && beta != 0) {
          const int64_t ni = in3.size(0) == 1 ? 0 : n, ii = in3.size(1) == 1 ? 0 : i, ji = in3.size(2) == 1 ? 0 : j;
          value += beta * in3.select(0, ni).select(0, ii).select(0, ji).item<double>();
        }
        out.push_back(value);
      }
  return out;
}

}  // namespace

TEST_CASE("bmm, baddbmm and addmm match the definition for every float dtype", "[addmm]") {
  manual_seed(31);
  for (DType dtype : float_dtypes()) {
    INFO(dtype_name(dtype));
    const Tensor a = random_nonzero({3, 4, 5}, dtype), b = random_nonzero({3, 5, 6}, dtype);
    const Tensor c = bmm(a, b);
    CHECK(c.sizes() == Shape{3, 4, 6});
    CHECK(c.dtype() == dtype);
    check_close(c, reference(Tensor(), a, b, 0, 1), dtype, "bmm");
    check_close(a.bmm(b), reference(Tensor(), a, b, 0, 1), dtype, "Tensor::bmm");

    // Every shape the input may broadcast from, with (beta, alpha) on each of the paths.
    for (const Shape& input_shape : {Shape{3, 4, 6}, Shape{6}, Shape{4, 1}, Shape{3, 1, 6}, Shape{1, 4, 6}, Shape{}}) {
      for (auto [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{0.5, 1.0}, std::pair{1.0, -2.0}, std::pair{-1.5, 0.25}}) {
        INFO("input " << shape_str(input_shape) << ", beta " << beta << ", alpha " << alpha);
        const Tensor input = random_nonzero(input_shape, dtype);
        const Tensor out = baddbmm(input, a, b, beta, alpha);
        CHECK(out.sizes() == Shape{3, 4, 6});
        check_close(out, reference(input, a, b, beta, alpha), dtype, "baddbmm");
        check_close(input.baddbmm(a, b, beta, alpha), reference(input, a, b, beta, alpha), dtype, "Tensor::baddbmm");
      }
    }
    for (const Shape& input_shape : {Shape{4, 6}, Shape{6}, Shape{4, 1}, Shape{1, 6}, Shape{}}) {
      for (auto [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{2.0, 1.0}, std::pair{1.0, 0.5}, std::pair{-0.5, 3.0}}) {
        INFO("addmm input " << shape_str(input_shape) << ", beta " << beta << ", alpha " << alpha);
        const Tensor m1 = a.select(0, 1), m2 = b.select(0, 2), input = random_nonzero(input_shape, dtype);
        const Tensor out = addmm(input, m1, m2, beta, alpha);
        CHECK(out.sizes() == Shape{4, 6});
        check_close(out, reference(input, m1.unsqueeze(0), m2.unsqueeze(0), beta, alpha), dtype, "addmm");
        check_close(input.addmm(m1, m2, beta, alpha), reference(input, m1.unsqueeze(0), m2.unsqueeze(0), beta, alpha),
                    dtype, "Tensor::addmm");
      }
    }
  }
}

TEST_CASE("baddbmm and addmm with beta = 0 do not read the input", "[addmm]") {
  manual_seed(32);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor a = random_nonzero({2, 3, 4}), b = random_nonzero({2, 4, 5});
  const Tensor poisoned = full({2, 3, 5}, nan).masked_fill(rand({2, 3, 5}).lt(0.5), inf);
  const Tensor out = baddbmm(poisoned, a, b, 0, 2);
  CHECK_FALSE(out.isnan().any().item<bool>());
  check_close(out, reference(Tensor(), a, b, 0, 2), kFloat32, "baddbmm beta 0");
  const Tensor out2 = addmm(full({5}, nan), a.select(0, 0), b.select(0, 0), 0);
  CHECK_FALSE(out2.isnan().any().item<bool>());
  check_close(out2, reference(Tensor(), a.narrow(0, 0, 1), b.narrow(0, 0, 1), 0, 1), kFloat32, "addmm beta 0");
  // With beta != 0 the NaN arrives, as in PyTorch.
  CHECK(addmm(full({5}, nan), a.select(0, 0), b.select(0, 0)).isnan().all().item<bool>());
}

TEST_CASE("bmm, baddbmm and addmm read strided operands in place", "[addmm]") {
  manual_seed(33);
  // Transposed and sliced views: (B, M, K) from (B, K, M), every other batch entry.
  const Tensor at = random_nonzero({4, 5, 3}).transpose(1, 2).narrow(0, 1, 3);  // (3, 3, 5)
  const Tensor bt = random_nonzero({6, 3, 5}).permute({1, 2, 0});  // (3, 5, 6)
  REQUIRE_FALSE(at.is_contiguous());
  REQUIRE_FALSE(bt.is_contiguous());
  check_close(bmm(at, bt), reference(Tensor(), at, bt, 0, 1), kFloat32, "bmm of views");
  const Tensor input = random_nonzero({6, 3}).t();  // (3, 6) transposed
  check_close(baddbmm(input, at, bt, 0.5, 2), reference(input, at, bt, 0.5, 2), kFloat32, "baddbmm of views");
  check_close(addmm(input, at.select(0, 2), bt.select(0, 1), 1, 1),
              reference(input, at.narrow(0, 2, 1), bt.narrow(0, 1, 1), 1, 1), kFloat32, "addmm of views");
}

TEST_CASE("bmm, baddbmm and addmm gradcheck in float64, the broadcast input included", "[addmm]") {
  manual_seed(34);
  CHECK(gradcheck([](const std::vector<Tensor>& x) { return bmm(x[0], x[1]); }, {leaf({2, 3, 4}), leaf({2, 4, 5})}));
  for (const Shape& input_shape : {Shape{2, 3, 5}, Shape{5}, Shape{3, 1}, Shape{2, 1, 5}}) {
    INFO("baddbmm input " << shape_str(input_shape));
    CHECK(gradcheck([](const std::vector<Tensor>& x) { return baddbmm(x[0], x[1], x[2], 0.5, -1.5); },
                    {leaf(input_shape), leaf({2, 3, 4}), leaf({2, 4, 5})}));
    CHECK(gradcheck([](const std::vector<Tensor>& x) { return baddbmm(x[0], x[1], x[2]); },
                    {leaf(input_shape), leaf({2, 3, 4}), leaf({2, 4, 5})}));
  }
  for (const Shape& input_shape : {Shape{3, 5}, Shape{5}, Shape{3, 1}, Shape{}}) {
    INFO("addmm input " << shape_str(input_shape));
    CHECK(gradcheck([](const std::vector<Tensor>& x) { return addmm(x[0], x[1], x[2], 2, 0.75); },
                    {leaf(input_shape), leaf({3, 4}), leaf({4, 5})}));
  }
  // beta = 0: the input's gradient is zero (it was not read), the others as usual.
  Tensor input = leaf({3, 5}), m1 = leaf({3, 4}), m2 = leaf({4, 5});
  addmm(input, m1, m2, 0, 2).sum().backward();
  CHECK(input.grad().abs().max().item<double>() == 0);
  check_close(m1.grad(), ones({3, 5}, kFloat64).matmul(m2.detach().t()) * 2, "d mat1 at beta 0");
  // One node each, named as the op.
  CHECK(bmm(leaf({1, 2, 2}), leaf({1, 2, 2})).grad_fn()->name() == "BmmBackward");
  CHECK(baddbmm(leaf({2}), leaf({1, 2, 2}), leaf({1, 2, 2})).grad_fn()->name() == "BaddbmmBackward");
  CHECK(addmm(leaf({2}), leaf({2, 2}), leaf({2, 2})).grad_fn()->name() == "AddmmBackward");
}

TEST_CASE("bmm, baddbmm and addmm run in the lower precision under CPU autocast", "[addmm][amp]") {
  manual_seed(35);
  const Tensor a = random_nonzero({2, 3, 4}), b = random_nonzero({2, 4, 5}), input = random_nonzero({5});
  amp::AutocastGuard autocast(kCPU);  // bfloat16
  const Tensor outs[] = {bmm(a, b), baddbmm(input, a, b), addmm(input, a.select(0, 0), b.select(0, 0))};
  for (const Tensor& out : outs) CHECK(out.dtype() == kBFloat16);
  // From the bfloat16-rounded operands: the product of what autocast made of them.
  const Tensor a16 = a.to(kBFloat16), b16 = b.to(kBFloat16), in16 = input.to(kBFloat16);
  check_close(outs[1], reference(in16, a16, b16, 1, 1), kBFloat16, "baddbmm under autocast");
  // float64 is not cast.
  CHECK(bmm(a.to(kFloat64), b.to(kFloat64)).dtype() == kFloat64);
}

TEST_CASE("bmm, baddbmm and addmm reject what PyTorch rejects, naming the op and the shapes", "[addmm]") {
  require_throws_with<ShapeError>([] { bmm(zeros({3, 4}), zeros({3, 4, 5})); }, {"bmm", "(3, 4) @ (3, 4, 5)", "3-D"});
  require_throws_with<ShapeError>([] { bmm(zeros({2, 3, 4}), zeros({2, 5, 6})); },
                                  {"bmm", "(2, 3, 4) @ (2, 5, 6)", "inner dimensions 4 and 5"});
  require_throws_with<ShapeError>([] { bmm(zeros({2, 3, 4}), zeros({1, 4, 6})); },
                                  {"bmm", "(2, 3, 4) @ (1, 4, 6)", "batch sizes 2 and 1"});
  require_throws_with<DTypeError>([] { bmm(zeros({2, 3, 4}), zeros({2, 4, 6}, kFloat64)); },
                                  {"bmm", "float64", "float32"});
  require_throws_with<DTypeError>([] { bmm(zeros({2, 3, 4}, kInt64), zeros({2, 4, 6}, kInt64)); },
                                  {"bmm", "int64", "floating-point"});
  require_throws_with<ShapeError>([] { baddbmm(zeros({4, 6}), zeros({2, 3, 4}), zeros({2, 4, 6})); },
                                  {"baddbmm", "(4, 6)", "does not broadcast", "(2, 3, 6)"});
  require_throws_with<ShapeError>([] { baddbmm(zeros({1, 2, 3, 6}), zeros({2, 3, 4}), zeros({2, 4, 6})); },
                                  {"baddbmm", "(1, 2, 3, 6)", "does not broadcast"});
  require_throws_with<DTypeError>([] { baddbmm(zeros({6}, kFloat64), zeros({2, 3, 4}), zeros({2, 4, 6})); },
                                  {"baddbmm", "float64", "float32"});
  require_throws_with<ShapeError>([] { addmm(zeros({6}), zeros({2, 3, 4}), zeros({4, 6})); },
                                  {"addmm", "(2, 3, 4) @ (4, 6)", "2-D"});
  require_throws_with<ShapeError>([] { addmm(zeros({3, 5}), zeros({3, 4}), zeros({4, 6})); },
                                  {"addmm", "(3, 5) + (3, 4) @ (4, 6)", "does not broadcast", "(3, 6)"});
  require_throws_with<ShapeError>([] { addmm(zeros({6}), zeros({3, 4}), zeros({5, 6})); },
                                  {"addmm", "inner dimensions 4 and 5"});
  require_throws_with<ValueError>([] { addmm(Tensor(), zeros({3, 4}), zeros({4, 6})); }, {"addmm", "input"});
}

TEST_CASE("docs/ops.md: the matrix products example runs", "[addmm]") {
  manual_seed(36);
  Tensor a = randn({4, 3, 5}), b = randn({4, 5, 2});
  Tensor c = bmm(a, b);
  Tensor bias = randn({2});
  Tensor d = baddbmm(bias, a, b, /*beta=*/0.5, /*alpha=*/2);
  Tensor x = randn({8, 5}), w = randn({2, 5});
  Tensor y = addmm(bias, x, w.t());
  Tensor z = bias.addmm(x, w.t(), /*beta=*/0);
  CHECK(c.sizes() == Shape{4, 3, 2});
  CHECK(allclose(d, bias * 0.5 + a.matmul(b) * 2, 1e-5, 1e-5));
  CHECK(allclose(y, x.matmul(w.t()) + bias, 1e-5, 1e-5));
  CHECK(allclose(z, x.matmul(w.t()), 1e-5, 1e-6));
}

// On a GPU (cuBLAS through kernels::bmm) against the CPU on the same rounded operands:
// every float dtype, the broadcast inputs, (beta, alpha) on each path, the gradients, and
// CUDA autocast's float16.
TEST_CASE("cuda: bmm, baddbmm and addmm match the CPU, gradients and autocast too", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(37);
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dtype_name(dtype));
    const Tolerance tol = tolerance(dtype);
    auto same = [&](const Tensor& gpu, const Tensor& cpu, const char* what) {
      INFO(what);
      REQUIRE(gpu.is_cuda());
      REQUIRE(gpu.dtype() == cpu.dtype());
      CHECK(allclose(gpu.to(kCPU).to(kFloat64), cpu.to(kFloat64), tol.rtol * 4, tol.atol * 4));
    };
    const Tensor a = random_nonzero({3, 17, 33}, dtype), b = random_nonzero({3, 33, 9}, dtype);
    same(bmm(a.to(kCUDA), b.to(kCUDA)), bmm(a, b), "bmm");
    same(bmm(a.transpose(1, 2).contiguous().transpose(1, 2).to(kCUDA), b.to(kCUDA)), bmm(a, b), "bmm of a view");
    for (const Shape& input_shape : {Shape{3, 17, 9}, Shape{9}, Shape{17, 1}}) {
      for (auto [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{0.0, 2.0}, std::pair{0.5, -1.5}}) {
        INFO("input " << shape_str(input_shape) << ", beta " << beta << ", alpha " << alpha);
        const Tensor input = random_nonzero(input_shape, dtype);
        same(baddbmm(input.to(kCUDA), a.to(kCUDA), b.to(kCUDA), beta, alpha), baddbmm(input, a, b, beta, alpha),
             "baddbmm");
        if (input.dim() <= 2)
          same(addmm(input.to(kCUDA), a.select(0, 1).to(kCUDA), b.select(0, 2).to(kCUDA), beta, alpha),
               addmm(input, a.select(0, 1), b.select(0, 2), beta, alpha), "addmm");
      }
    }
  }
  // Gradients on the GPU against the CPU's, float32.
  const Tensor input = random_nonzero({9}), a = random_nonzero({3, 17, 33}), b = random_nonzero({3, 33, 9});
  auto grads = [&](Device device) {
    Tensor i = input.to(device).requires_grad_(true), x = a.to(device).requires_grad_(true),
           y = b.to(device).requires_grad_(true);
    (baddbmm(i, x, y, 0.5, 2).pow(2).sum() + addmm(i, x.select(0, 0), y.select(0, 1), 2, 0.5).sum()).backward();
    return std::vector<Tensor>{i.grad().to(kCPU), x.grad().to(kCPU), y.grad().to(kCPU)};
  };
  const std::vector<Tensor> gpu = grads(kCUDA), cpu = grads(kCPU);
  for (size_t n = 0; n < gpu.size(); ++n) CHECK(allclose(gpu[n], cpu[n], 1e-4, 1e-4));
  // CUDA autocast: float16.
  amp::AutocastGuard autocast(kCUDA);
  CHECK(bmm(a.to(kCUDA), b.to(kCUDA)).dtype() == kFloat16);
  CHECK(baddbmm(input.to(kCUDA), a.to(kCUDA), b.to(kCUDA)).dtype() == kFloat16);
  CHECK(addmm(input.to(kCUDA), a.select(0, 0).to(kCUDA), b.select(0, 0).to(kCUDA)).dtype() == kFloat16);
}
