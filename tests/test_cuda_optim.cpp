// The optimizers' CUDA updates (kernels/cuda/optim_update.cu) and clip_grad_norm_ on CUDA
// against the CPU: the same random parameters and gradients on both devices, 20 steps with
// fresh gradients each, parameters and every state buffer compared after each step. Sizes
// are not multiples of the block size (1000003 and 7), and one parameter skips some steps,
// so the per-parameter step counts differ.
//
// The "[.cuda]" cases skip themselves without a GPU. The "[optim]" case runs everywhere: it
// checks the device-agnostic clip_grad_norm_ on the CPU against a plain loop.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "test_util.h"

#include "nn/linear.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/clip_grad.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "kernels/kernels.h"

using namespace loom;
using namespace loom::optim;
using namespace loom::test;

namespace {

// CPU and GPU agree to rounding, which may differ per step (the GPU contracts to FMAs):
// float32 and float64 to tol * (1 + |want|), the 16-bit types to the suite's table.
Tolerance optim_tolerance(DType dtype) {
  if (dtype == kFloat32) return {1e-5, 1e-5};
  if (dtype == kFloat64) return {1e-10, 1e-10};
  return tolerance(dtype);
}

// got (any device) against want (CPU) elementwise, in float64 tensor ops (fast for a
// million elements); on a miss, check_close names the first bad element.
void require_close_to_cpu(const Tensor& got, const Tensor& want, DType dtype, const std::string& what) {
  INFO(what);
  REQUIRE(got.sizes() == want.sizes());
  REQUIRE(got.dtype() == want.dtype());
  const Tolerance tol = optim_tolerance(dtype);
  const Tensor g = got.to(kCPU).to(kFloat64);
  const Tensor w = want.to(kFloat64);
  const double worst = ((g - w).abs() - (w.abs() * tol.rtol + tol.atol)).max().item<double>();
  if (!(worst <= 0)) {
    std::vector<double> a = g.to_vector<double>(), b = w.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i)
      if (!(std::abs(a[i] - b[i]) <= tol.atol + tol.rtol * std::abs(b[i])))
        FAIL(what << " element " << i << ": CUDA " << a[i] << ", CPU " << b[i] << " (" << dtype_name(dtype) << ")");
  }
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

// Steps one optimizer on CPU parameters and a twin on their CUDA copies with the same
// gradients, comparing parameters and state_dicts (buffers and step counts) each step. The
// twin is make_gpu's when given (a capturable one against the eager CPU).
void compare_cpu_and_cuda(const MakeOptimizer& make, DType dtype, const std::vector<Shape>& shapes,
                          const MakeOptimizer& make_gpu = nullptr) {
  manual_seed(1234);
  std::vector<Tensor> cpu, gpu;
  for (const Shape& s : shapes) {
    const Tensor init = random_nonzero(s, dtype);
    cpu.push_back(init.clone().requires_grad_(true));
    gpu.push_back(init.to(kCUDA).requires_grad_(true));
  }
  std::unique_ptr<Optimizer> cpu_opt = make(cpu), gpu_opt = (make_gpu ? make_gpu : make)(gpu);
  for (int64_t t = 0; t < 20; ++t) {
    for (size_t j = 0; j < shapes.size(); ++j) {
      // The last parameter has no gradient every third step: it is skipped then.
      const bool skip = j + 1 == shapes.size() && t % 3 == 1;
      const Tensor g = skip ? Tensor() : random_nonzero(shapes[j], dtype);
      cpu[j].mutable_grad() = g;
      gpu[j].mutable_grad() = skip ? Tensor() : g.to(kCUDA);
    }
    cpu_opt->step();
    const uint64_t syncs = cuda::host_sync_count();
    gpu_opt->step();
    CHECK(cuda::host_sync_count() == syncs);  // an optimizer step waits for nothing
    const std::string at = std::string(cpu_opt->name()) + " " + dtype_name(dtype) + " step " + std::to_string(t + 1);
    for (size_t j = 0; j < shapes.size(); ++j) {
      REQUIRE(gpu[j].is_cuda());
      require_close_to_cpu(gpu[j].detach(), cpu[j].detach(), dtype, at + " parameter " + std::to_string(j));
    }
    const StateDict want = cpu_opt->state_dict(), got = gpu_opt->state_dict();
    REQUIRE(got.size() == want.size());
    for (const auto& [key, w] : want) {
      INFO(at << " state " << key);
      REQUIRE(got.count(key) == 1);
      const Tensor& g = got.at(key);
      if (key.rfind("state.", 0) == 0 && w.is_floating_point()) {
        REQUIRE(g.device() == gpu[0].device());  // buffers live with their parameters
        require_close_to_cpu(g, w, dtype, at + " " + key);
      } else {
        CHECK(g.to_vector<double>() == w.to_vector<double>());  // counts and lrs: exact
      }
    }
  }
}

const std::vector<Shape> kShapes{{1000003}, {7}};

// Fresh zero leaves on device with copies of grads as their gradients.
std::vector<Tensor> params_with_grads(const std::vector<Tensor>& grads, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& g : grads) {
    out.push_back(zeros(g.sizes(), TensorOptions(g.dtype()).device(device)).requires_grad_(true));
    out.back().mutable_grad() = g.to(device).clone();  // clipped in place: never grads' own storage
  }
  return out;
}

}  // namespace

// ---- optimizers: CUDA against the CPU ------------------------------------------------------------

TEST_CASE("cuda optim: SGD with momentum, nesterov and weight decay matches the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  compare_cpu_and_cuda(
      [](std::vector<Tensor> p) {
        return std::make_unique<SGD>(std::move(p), SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(0.01));
      },
      kFloat32, kShapes);
}

TEST_CASE("cuda optim: Adam matches the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  compare_cpu_and_cuda(
      [](std::vector<Tensor> p) {
        return std::make_unique<Adam>(std::move(p), AdamOptions(0.01).betas(0.8, 0.99).weight_decay(0.02));
      },
      kFloat32, kShapes);
}

TEST_CASE("cuda optim: AdamW with amsgrad matches the CPU, in float32 and bfloat16", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const MakeOptimizer adamw = [](std::vector<Tensor> p) {
    return std::make_unique<AdamW>(std::move(p), AdamOptions(0.01).weight_decay(0.1).amsgrad(true));
  };
  compare_cpu_and_cuda(adamw, kFloat32, kShapes);
  compare_cpu_and_cuda(adamw, kBFloat16, {{100003}, {7}});
  compare_cpu_and_cuda(adamw, kFloat64, {{1003}, {7}});
}

TEST_CASE("cuda optim: RMSprop centered with momentum matches the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  compare_cpu_and_cuda(
      [](std::vector<Tensor> p) {
        return std::make_unique<RMSprop>(std::move(p),
                                         RMSpropOptions(0.01).alpha(0.9).momentum(0.5).centered(true).weight_decay(0.01));
      },
      kFloat32, kShapes);
}

// ---- fused updates of many parameters, capturable optimizers ---------------------------------

namespace {

// 40 parameters (more than one launch's kMaxListTensors) of sizes around the chunk sizes.
std::vector<Shape> many_shapes() {
  std::vector<Shape> shapes;
  for (int64_t n : {1, 3, 255, 256, 257, 16383, 16384, 16385, 40000, 7})
    for (int copies = 0; copies < 4; ++copies) shapes.push_back({n + copies});
  return shapes;
}

// An optimizer by name, eager or capturable, with options that switch on every buffer.
MakeOptimizer optimizer_named(const std::string& name, bool capturable) {
  return [=](std::vector<Tensor> p) -> std::unique_ptr<Optimizer> {
    if (name == "SGD")
      return std::make_unique<SGD>(
          std::move(p), SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(0.01).capturable(capturable));
    if (name == "Adam")
      return std::make_unique<Adam>(std::move(p), AdamOptions(0.01).betas(0.8, 0.99).capturable(capturable));
    if (name == "AdamW")
      return std::make_unique<AdamW>(std::move(p), AdamOptions(0.01).amsgrad(true).capturable(capturable));
    return std::make_unique<RMSprop>(
        std::move(p), RMSpropOptions(0.01).momentum(0.5).centered(true).weight_decay(0.01).capturable(capturable));
  };
}

const std::vector<std::string> kOptimizers{"SGD", "Adam", "AdamW", "RMSprop"};

}  // namespace

TEST_CASE("cuda optim: one step of 40 parameters in a few launches matches the CPU, eager and capturable",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (const std::string& name : kOptimizers) {
    INFO(name);
    compare_cpu_and_cuda(optimizer_named(name, false), kFloat32, many_shapes());
    compare_cpu_and_cuda(optimizer_named(name, false), kFloat32, kShapes, optimizer_named(name, true));
    compare_cpu_and_cuda(optimizer_named(name, false), kBFloat16, {{100003}, {7}}, optimizer_named(name, true));
  }
}

TEST_CASE("cuda optim: a capturable step reads the lr a scheduler wrote and GradScaler's flag on the device",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (const std::string& name : kOptimizers) {
    INFO(name);
    manual_seed(8);
    const Tensor init = random_nonzero({5000});
    Tensor cpu = init.clone().requires_grad_(true), gpu = init.to(kCUDA).requires_grad_(true);
    std::unique_ptr<Optimizer> eager = optimizer_named(name, false)({cpu});
    std::unique_ptr<Optimizer> capturable = optimizer_named(name, true)({gpu});
    StepLR eager_schedule(*eager, 2, 0.5), capturable_schedule(*capturable, 2, 0.5);
    amp::GradScaler eager_scaler({.init_scale = 256.0}), capturable_scaler({.init_scale = 256.0});
    for (int t = 0; t < 8; ++t) {
      Tensor g = random_nonzero({5000}) * 256.0;
      if (t == 3) g.narrow(0, 17, 1).fill_(INFINITY);  // this step is skipped
      cpu.mutable_grad() = g;
      gpu.mutable_grad() = g.to(kCUDA);
      const bool stepped = eager_scaler.step(*eager);
      eager_scaler.update();
      eager_schedule.step();
      const uint64_t syncs = cuda::host_sync_count();
      CHECK(capturable_scaler.step(*capturable));  // queued
      capturable_scaler.update();
      capturable_schedule.step();
      CHECK(cuda::host_sync_count() == syncs);  // unscale, inf check, step, scale, lr: no wait
      CHECK(stepped == (t != 3));
      require_close_to_cpu(gpu.detach(), cpu.detach(), kFloat32, name + " step " + std::to_string(t));
      CHECK(capturable_scaler.get_scale() == eager_scaler.get_scale());
    }
  }
}

// The fused update (kernels::sgd_update) refuses state on another device or a
// non-contiguous one, a list of two devices or dtypes and capturable scalars of the wrong
// kind, on `device`, and otherwise makes the plain SGD step.
static void check_update_operands(Device device) {
  const TensorOptions on_device = TensorOptions().device(device);
  const Device other = device.is_cpu() ? Device(kCUDA) : Device(kCPU);
  Tensor p = random_nonzero({3, 4}).to(device);
  const Tensor g = random_nonzero({3, 4}).to(device);
  const kernels::SgdHyper plain{0.0, 0.0, 0.0, false, true};  // p -= lr g
  kernels::UpdateScalars eager;
  eager.lr = 0.1;
  eager.steps = {1};
  auto sgd = [&](const Tensor& grad, const Tensor& state, const kernels::UpdateScalars& scalars) {
    kernels::sgd_update("SGD", kernels::ParamList<1>{{p}, {grad}, {{state}}}, plain, scalars);
  };
  if (other.is_cpu() || cuda::is_available()) {
    const Tensor elsewhere = other.is_cpu() ? zeros({3, 4}) : zeros({3, 4}, TensorOptions().device(other));
    require_throws_with<DeviceError>([&] { sgd(g, elsewhere, eager); },
                                     {"SGD", "state", other.is_cpu() ? "cpu" : "cuda"});
  }
  const Tensor transposed = zeros({4, 3}, on_device).t();
  require_throws_with<ValueError>([&] { sgd(g, transposed, eager); }, {"SGD", "contiguous"});
  require_throws_with<ValueError>([&] { sgd(Tensor(), Tensor(), eager); }, {"SGD", "no gradient"});
  const Tensor q = random_nonzero({2}, kFloat64).to(device);
  kernels::UpdateScalars two = eager;
  two.steps = {1, 1};
  const kernels::ParamList<1> mixed{{p, q}, {g, q.clone()}, {{Tensor()}, {Tensor()}}};
  require_throws_with<ValueError>([&] { kernels::sgd_update("SGD", mixed, plain, two); },
                                  {"SGD", "one device and dtype", "float32", "float64"});
  kernels::UpdateScalars capturable;
  capturable.device_lr = full({}, 0.1, TensorOptions(kFloat32).device(device));  // not float64
  require_throws_with<ValueError>([&] { sgd(g, Tensor(), capturable); }, {"SGD", "learning rate", "float64"});
  const Tensor before = p.to(kCPU).clone();  // (to(kCPU) of a CPU tensor is the tensor itself)
  sgd(g, Tensor(), eager);
  require_close_to_cpu(p, before - g.to(kCPU) * 0.1, kFloat32, "plain SGD step");
  capturable.device_lr = full({}, 0.1, TensorOptions(kFloat64).device(device));
  sgd(g, Tensor(), capturable);
  require_close_to_cpu(p, before - g.to(kCPU) * 0.2, kFloat32, "plain SGD step, capturable");
}

TEST_CASE("optim: the fused update rejects state on another device or non-contiguous", "[optim]") {
  check_update_operands(kCPU);
}

TEST_CASE("cuda optim: the update kernel rejects state on another device or non-contiguous", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  check_update_operands(kCUDA);
}

// ---- clip_grad_norm_ ---------------------------------------------------------------------------------

TEST_CASE("cuda optim: clip_grad_norm_ on CUDA matches the CPU (2, 1, 3, inf)", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(99);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    const std::vector<Tensor> grads{random_nonzero({1000003}, dtype), random_nonzero({7}, dtype),
                                    random_nonzero({3, 5}, dtype)};
    for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
      for (double max_norm : {0.5, 1e9}) {  // clips / leaves the gradients alone
        INFO(dtype_name(dtype) << " norm " << norm_type << " max_norm " << max_norm);
        std::vector<Tensor> cpu = params_with_grads(grads, kCPU), gpu = params_with_grads(grads, kCUDA);
        gpu.push_back(zeros({2}, TensorOptions(dtype).device(kCUDA)).requires_grad_(true));  // no gradient
        const double want = clip_grad_norm_(cpu, max_norm, norm_type).item<double>();
        const uint64_t syncs = cuda::host_sync_count();
        const Tensor norm = clip_grad_norm_(gpu, max_norm, norm_type);
        CHECK(cuda::host_sync_count() == syncs);  // the norm and the scaling stay on the GPU
        REQUIRE(norm.is_cuda());
        const double got = norm.item<double>();
        // float64 terms sum in double on both; float32 and 16-bit ones in float, in short runs
        // (Note [fixed-order norm]), in a different order on each device.
        CHECK(std::abs(got - want) <= (dtype == kFloat64 ? 1e-12 : 2e-6) * want);
        for (size_t j = 0; j < grads.size(); ++j) {
          REQUIRE(gpu[j].grad().is_cuda());
          require_close_to_cpu(gpu[j].grad(), cpu[j].grad(), dtype, "gradient " + std::to_string(j));
        }
        CHECK_FALSE(gpu.back().grad().defined());
        if (max_norm > want)
          for (size_t j = 0; j < grads.size(); ++j)
            CHECK(gpu[j].grad().to_vector<double>() == grads[j].to_vector<double>());  // untouched
      }
    }
  }
}

TEST_CASE("cuda optim: a NaN gradient gives a NaN norm on CUDA and leaves the gradients alone, as on the CPU",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const std::vector<Tensor> grads{random_nonzero({300}), tensor<float>({1.f, std::numeric_limits<float>::quiet_NaN()})};
  for (double norm_type : {2.0, std::numeric_limits<double>::infinity()}) {
    INFO("norm " << norm_type);
    std::vector<Tensor> cpu = params_with_grads(grads, kCPU), gpu = params_with_grads(grads, kCUDA);
    CHECK(std::isnan(clip_grad_norm_(cpu, 1.0, norm_type).item<double>()));
    CHECK(std::isnan(clip_grad_norm_(gpu, 1.0, norm_type).item<double>()));
    CHECK(gpu[0].grad().cpu().to_vector<float>() == cpu[0].grad().to_vector<float>());
    CHECK(gpu[0].grad().cpu().to_vector<float>() == grads[0].to_vector<float>());
  }
}

TEST_CASE("cuda optim: a CPU step refuses optimizer state left on the GPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(22);
  nn::Linear linear(4, 3);
  linear->to(kCUDA);
  Adam adam(linear->parameters(), AdamOptions(1e-2));
  auto step = [&] {
    adam.zero_grad();
    linear(randn({2, 4}, TensorOptions().device(linear->weight.device()))).sum().backward();
    adam.step();
  };
  step();  // Adam's state is made on the GPU
  linear->to(kCPU);
  require_throws_with<DeviceError>(step, {"parameter on cpu", "state", "on cuda:0"});
}

TEST_CASE("clip_grad_norm_ matches a plain loop over mixed dtypes, and a NaN gives a NaN norm", "[optim]") {
  manual_seed(7);
  const std::vector<Tensor> grads{random_nonzero({257}, kFloat32), random_nonzero({3, 5}, kFloat64),
                                  random_nonzero({9}, kBFloat16)};
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
    INFO("norm " << norm_type);
    // The reference: the joint norm of the gradients' values, in double.
    double sum = 0, max = 0;
    for (const Tensor& g : grads)
      for (double x : g.to_vector<double>()) {
        sum += std::pow(std::abs(x), norm_type);
        max = std::max(max, std::abs(x));
      }
    const double want = std::isinf(norm_type) ? max : std::pow(sum, 1.0 / norm_type);
    std::vector<Tensor> params = params_with_grads(grads, kCPU);
    const double got = clip_grad_norm_(params, 0.25, norm_type).item<double>();
    CHECK(std::abs(got - want) <= 2e-6 * want);  // float32 and bfloat16 terms are summed in float
    const double coef = 0.25 / (got + 1e-6);  // the gradients are scaled by the norm returned
    for (size_t j = 0; j < grads.size(); ++j) {
      REQUIRE(params[j].grad().dtype() == grads[j].dtype());
      std::vector<double> scaled = grads[j].to_vector<double>();
      for (double& x : scaled) x *= coef;
      check_close(params[j].grad(), scaled, grads[j].dtype(), "gradient " + std::to_string(j));
    }
  }
  const Tensor with_nan = tensor<double>({1.0, std::numeric_limits<double>::quiet_NaN()});
  for (double norm_type : {2.0, std::numeric_limits<double>::infinity()}) {
    INFO("norm " << norm_type);
    CHECK(std::isnan(clip_grad_norm_(params_with_grads({grads[0], with_nan}, kCPU), 1.0, norm_type).item<double>()));
  }
}
