// The fused CUDA layer norm (kernels/cuda/layer_norm.cu, Note [CUDA layer norm]) against the
// CPU's fused kernel (itself tested against the composition of ops, tests/test_layer_norm.cpp):
// y, mean, rstd, dx, dweight and dbias for rows shorter than a warp and longer than a block
// holds, every float dtype, 16-bit inputs with float32 or 16-bit parameters, with and
// without weight and bias; every GPU output between sentinels. Then the layer through
// autograd on a non-contiguous input. "[.cuda]": skipped without a GPU.
#include <cmath>
#include <optional>
#include <string>

#include "cuda_test_util.h"
#include "test_util.h"

#include "kernels/norm/layer_norm.h"
#include "nn/functional.h"

using namespace loom;
using namespace loom::test;

namespace {

// |got - want| within the dtype's tolerance, scaled by the tensor's largest |want| for the
// sums over rows (dweight, dbias: many terms that cancel).
void check_against(const Tensor& got_gpu, const Tensor& want, DType dtype, double scale_tol, const std::string& what) {
  INFO(what);
  const std::vector<double> got = got_gpu.cpu().to_vector<double>(), w = want.to_vector<double>();
  REQUIRE(got.size() == w.size());
  double scale = 0;
  for (double v : w) scale = std::max(scale, std::abs(v));
  const Tolerance tol = tolerance(dtype);
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(got[i])) continue;
    INFO("element " << i << ": got " << got[i] << ", expected " << w[i]);
    REQUIRE(std::abs(got[i] - w[i]) <= tol.atol + tol.rtol * std::abs(w[i]) + scale_tol * scale);
  }
}

// One (rows, n) case: the CPU kernels and the GPU ones on the same values.
void check_case(int64_t rows, int64_t n, DType dtype, std::optional<DType> param_dtype, bool bias) {
  const std::string what = std::string(dtype_name(dtype)) + " (" + std::to_string(rows) + ", " + std::to_string(n) +
                           ")" + (param_dtype ? std::string(" weight ") + dtype_name(*param_dtype) : " no weight") +
                           (bias ? " with bias" : " no bias");
  INFO(what);
  const DType stats = dtype == kFloat64 ? kFloat64 : kFloat32;
  const Tensor x = random_nonzero({rows, n}, dtype, -3, 3), dy = random_nonzero({rows, n}, dtype);
  const Tensor w = param_dtype ? random_nonzero({n}, *param_dtype) : Tensor();
  const Tensor b = param_dtype && bias ? random_nonzero({n}, *param_dtype) : Tensor();
  const double eps = 1e-5;
  // The CPU.
  Tensor y = empty({rows, n}, dtype), mean = empty({rows}, stats), rstd = empty({rows}, stats);
  kernels::layer_norm_forward(y, mean, rstd, x, w, b, eps);
  Tensor dx = empty({rows, n}, dtype);
  Tensor dw = w.defined() ? empty({n}, w.dtype()) : Tensor(), db = b.defined() ? empty({n}, b.dtype()) : Tensor();
  kernels::layer_norm_backward(dx, dw, db, dy, x, mean, rstd, w);
  // The GPU, each output between sentinels.
  auto gpu = [](const Tensor& t) { return t.defined() ? t.to(kCUDA) : Tensor(); };
  const Guarded gy = guarded({rows, n}, dtype), gmean = guarded({rows}, stats), grstd = guarded({rows}, stats);
  kernels::layer_norm_forward(gy.out, gmean.out, grstd.out, gpu(x), gpu(w), gpu(b), eps);
  const Guarded gdx = guarded({rows, n}, dtype);
  std::optional<Guarded> gdw, gdb;
  if (w.defined()) gdw = guarded({n}, w.dtype());
  if (b.defined()) gdb = guarded({n}, b.dtype());
  // The backward reads the GPU's own mean and rstd.
  kernels::layer_norm_backward(gdx.out, gdw ? gdw->out : Tensor(), gdb ? gdb->out : Tensor(), gpu(dy), gpu(x),
                               gmean.out, grstd.out, gpu(w));
  for (const auto& [g, name] : {std::pair{&gy, "y"}, std::pair{&gmean, "mean"}, std::pair{&grstd, "rstd"},
                                std::pair{&gdx, "dx"}})
    check_sentinels(*g, what + " " + name);
  check_against(gy.out, y, dtype, 0, "y");
  check_against(gmean.out, mean, stats, 1e-6, "mean");
  check_against(grstd.out, rstd, stats, 0, "rstd");
  check_against(gdx.out, dx, dtype, dtype == kFloat64 ? 0 : 1e-5, "dx");
  // dweight and dbias sum rows x n products: float32 rounding of `rows` terms.
  const double sum_tol = dtype == kFloat64 ? 1e-12 : 1e-6 * double(rows);
  if (gdw) {
    check_sentinels(*gdw, what + " dweight");
    check_against(gdw->out, dw, dw.dtype(), sum_tol, "dweight");
  }
  if (gdb) {
    check_sentinels(*gdb, what + " dbias");
    check_against(gdb->out, db, db.dtype(), sum_tol, "dbias");
  }
}

}  // namespace

TEST_CASE("cuda layer norm: forward and backward match the CPU kernel for every row length and dtype", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(41);
  // Rows a group of lanes holds (1-1024), a block holds (1025-4096, 16-byte or scalar
  // loads), and longer ones read from memory on each pass; a batch of 1, 7 and 1000 rows.
  // (The CUDA check runs racecheck over these tests: the other dtypes take fewer sizes.)
  for (int64_t n : {1, 7, 32, 100, 1024, 1025, 1026, 4096, 5000})
    for (int64_t rows : {1, 7, 1000}) check_case(rows, n, kFloat32, kFloat32, true);
  for (int64_t n : {7, 1024, 1026, 4096, 5000}) {
    check_case(7, n, kFloat64, kFloat64, true);
    for (DType low : {kFloat16, kBFloat16}) {
      check_case(7, n, low, low, true);
      check_case(7, n, low, kFloat32, true);  // float32 parameters (CPU autocast's)
    }
  }
  check_case(7, 100, kFloat32, std::nullopt, false);
  check_case(7, 100, kFloat32, kFloat32, false);
  check_case(7, 100, kBFloat16, kFloat32, false);
}

TEST_CASE("cuda layer norm: the weight and bias gradients of many rows, summed in chunks", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(42);
  check_case(4099, 1027, kFloat32, kFloat32, true);
  check_case(20000, 64, kFloat32, kFloat32, true);
  check_case(4099, 33, kBFloat16, kFloat32, true);
}

TEST_CASE("cuda layer norm: nn::functional::layer_norm on the GPU gives the CPU's values and gradients",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(43);
  const Tensor base = random_nonzero({6, 5, 40});
  const Tensor w0 = random_nonzero({5, 6}), b0 = random_nonzero({5, 6});
  Tensor outs[2], grads[2][3];
  for (int k = 0; k < 2; ++k) {
    const Device d = k == 0 ? kCPU : kCUDA;
    REQUIRE(kernels::has_layer_norm_kernels(base.to(d)));
    // A non-contiguous input: (40, 5, 6) seen through a transpose.
    Tensor x = base.to(d).requires_grad_(true), w = w0.to(d).requires_grad_(true), b = b0.to(d).requires_grad_(true);
    Tensor y = nn::functional::layer_norm(x.transpose(0, 2), {5, 6}, w, b, 1e-5);
    (y * y).sum().backward();
    outs[k] = y.detach().cpu();
    grads[k][0] = x.grad().cpu();
    grads[k][1] = w.grad().cpu();
    grads[k][2] = b.grad().cpu();
  }
  check_close(outs[1], outs[0], "y");
  for (int i = 0; i < 3; ++i) check_close(grads[1][i], grads[0][i], "gradient " + std::to_string(i));
}
