// Mixed precision: autocast's cast policy against PyTorch 2.x (golden files made by
// tests/golden/make_amp_golden.py), its nesting, parameter cache and backward, the
// isfinite-based gradient scaler against PyTorch's schedule, and float16 gradients that
// underflow without the scaler and not with it.
#include "catch2_compat.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "core/build_info.h"
#include "core/cuda_emulation.h"
#include "core/factories.h"
#include "core/ops.h"
#include "cuda_test_util.h"
#include "kernels/kernels.h"
#include "kernels/math/elementwise_ops.h"
#include "kernels/support/autocast_policy.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

nlohmann::json golden_json(const std::string& name) {
  std::ifstream in(std::string(LOOM_TEST_DATA_DIR) + "/" + name + ".json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

const char* short_name(DType d) {
  return d == kBFloat16 ? "bf16" : d == kFloat16 ? "f16" : d == kFloat32 ? "f32" : d == kFloat64 ? "f64" : "other";
}

// The golden cases of autocast_cpu.json, each run on `device` with x (4, 6) float32, its
// `low` copy (the autocast dtype), weights w (5, 6), b (5) and class targets t (4).
std::map<std::string, std::function<Tensor()>> autocast_cases(Device device, DType low) {
  manual_seed(5);
  const TensorOptions f32 = TensorOptions(kFloat32).device(device);
  const Tensor x = randn({4, 6}, f32), xl = x.to(low);
  const Tensor w = randn({5, 6}, f32).requires_grad_(true), b = randn({5}, f32).requires_grad_(true);
  const Tensor t = tensor<int64_t>({0, 3, 5, 1}).to(device);
  const Tensor ones6 = ones({6}, f32), zeros6 = zeros({6}, f32);
  // The recurrent layers and cells: (T 4, B 1, I 6) through hidden size 5.
  const Tensor seq = x.unsqueeze(1);
  nn::LSTM lstm(nn::RNNOptions(6, 5));
  nn::GRU gru(nn::RNNOptions(6, 5));
  nn::RNN rnn_tanh(nn::RNNOptions(6, 5)), rnn_relu(nn::RNNOptions(6, 5).nonlinearity("relu"));
  nn::LSTMCell lstm_cell(6, 5);
  nn::GRUCell gru_cell(6, 5);
  nn::RNNCell rnn_cell(6, 5);
  lstm->to(device);
  gru->to(device);
  rnn_tanh->to(device);
  rnn_relu->to(device);
  lstm_cell->to(device);
  gru_cell->to(device);
  rnn_cell->to(device);
  return {
      {"lstm(f32)", [=] { return lstm(seq).output; }},
      {"lstm_c_n(f32)", [=] { return lstm(seq).c_n; }},
      {"rnn_tanh(f32)", [=] { return rnn_tanh(seq).output; }},
      {"rnn_relu(f32)", [=] { return rnn_relu(seq).output; }},
      {"gru(f32)", [=] { return gru(seq).output; }},
      {"gru(bf16)", [=] { return gru(seq.to(low)).output; }},
      {"lstm_cell(f32)", [=] { return lstm_cell(x).h; }},
      {"lstm_cell(bf16)", [=] { return lstm_cell(xl).c; }},
      {"gru_cell(f32)", [=] { return gru_cell(x); }},
      {"gru_cell(bf16)", [=] { return gru_cell(xl); }},
      {"rnn_cell(f32)", [=] { return rnn_cell(x); }},
      {"matmul(f32,f32)", [=] { return matmul(x, w.t()); }},
      {"matmul(bf16,f32)", [=] { return matmul(xl, w.t()); }},
      {"matmul(f64,f64)", [=] { return matmul(x.to(kFloat64), w.to(kFloat64).t()); }},
      {"mm(f32,f32)", [=] { return x.mm(w.t()); }},
      {"bmm(f32,f32)", [=] { return bmm(x.unsqueeze(0), w.t().unsqueeze(0)); }},
      {"baddbmm(f32,f32,f32)", [=] { return baddbmm(b, x.unsqueeze(0), w.t().unsqueeze(0)); }},
      {"addmm(f32,f32,f32)", [=] { return addmm(b, x, w.t()); }},
      {"linear(f32,f32,f32)", [=] { return F::linear(x, w, b); }},
      {"softmax(f32)", [=] { return x.softmax(1); }},
      {"softmax(bf16)", [=] { return xl.softmax(1); }},
      {"log_softmax(bf16)", [=] { return xl.log_softmax(1); }},
      {"layer_norm(bf16,f32,f32)", [=] { return F::layer_norm(xl, {6}, ones6, zeros6); }},
      {"exp(bf16)", [=] { return xl.exp(); }},
      {"log(bf16)", [=] { return xl.abs().log(); }},
      {"rsqrt(bf16)", [=] { return xl.abs().rsqrt(); }},
      {"pow(bf16)", [=] { return xl.pow(2); }},
      {"tanh(bf16)", [=] { return xl.tanh(); }},
      {"sum(bf16)", [=] { return xl.sum(); }},
      {"sum_dim(bf16)", [=] { return xl.sum(1); }},
      {"mean(bf16)", [=] { return xl.mean(); }},
      {"cumsum(bf16)", [=] { return xl.cumsum(1); }},
      {"logsumexp(bf16)", [=] { return xl.logsumexp({1}); }},
      {"add(f32,bf16)", [=] { return x + xl; }},
      {"mul(bf16,bf16)", [=] { return xl * xl; }},
      {"cat(f32,bf16)", [=] { return cat({x, xl}); }},
      {"stack(f32,bf16)", [=] { return stack({x, xl}); }},
      {"where(f32,bf16)", [=] { return where(x > 0, x, xl); }},
      {"cross_entropy(bf16)", [=] { return F::cross_entropy(xl, t); }},
      {"nll_loss(bf16)", [=] { return F::nll_loss(xl.log_softmax(1), t); }},
      {"mse_loss(bf16,f32)", [=] { return F::mse_loss(xl, x); }},
      {"l1_loss(bf16,f32)", [=] { return F::l1_loss(xl, x); }},
      {"smooth_l1_loss(bf16,f32)", [=] { return F::smooth_l1_loss(xl, x); }},
      {"binary_cross_entropy_with_logits(bf16,f32)",
       [=] { return F::binary_cross_entropy_with_logits(xl, x.sigmoid()); }},
      {"embedding(f32)", [=] { return embedding(w.t(), t); }},
      {"dropout(bf16)", [=] { return dropout(xl, 0.5, true); }},
      {"relu(bf16)", [=] { return xl.relu(); }},
      {"gelu(bf16)", [=] { return xl.gelu(); }},
      {"max(bf16)", [=] { return xl.max(); }},
      {"var(bf16)", [=] { return xl.var({1}); }},
      {"linear_weight_grad", [=] {
         Tensor loss;
         {
           amp::AutocastGuard inner(device, low);
           loss = F::linear(x, w, b).to(kFloat32).pow(2).sum();
         }
         w.mutable_grad() = Tensor();
         loss.backward();
         return w.grad();
       }},
  };
}

}  // namespace

TEST_CASE("autocast on the CPU gives PyTorch 2.x's output dtype for every golden case", "[amp]") {
  const nlohmann::json golden = golden_json("autocast_cpu");
  auto cases = autocast_cases(kCPU, kBFloat16);
  REQUIRE(cases.size() == golden.at("ops").size());
  amp::AutocastGuard amp(kCPU, kBFloat16);
  for (const auto& [name, expected] : golden.at("ops").items()) {
    INFO(name << " (PyTorch " << golden.at("torch").get<std::string>() << ")");
    REQUIRE(cases.count(name));
    CHECK(short_name(cases[name]().dtype()) == expected.get<std::string>());
  }
}

TEST_CASE("the CUDA policy follows PyTorch's CUDA lists, and runs on the emulated cuda:0", "[amp]") {
  const nlohmann::json golden = golden_json("autocast_cuda");
  const auto lower = golden.at("lower_precision").get<std::set<std::string>>();
  const auto fp32 = golden.at("float32").get<std::set<std::string>>();
  // PyTorch's name of each Loom op that has a CUDA policy (where it differs).
  const std::map<std::string, std::vector<std::string>> torch_names = {
      {"norm", {"linalg_vector_norm"}}, {"rnn_cell", {"rnn_tanh_cell", "rnn_relu_cell"}}};
  // Loom ops whose CUDA policy differs from PyTorch's on purpose, and why.
  const std::map<std::string, std::string> differs = {
      {"cross_entropy", "PyTorch's is log_softmax then nll_loss, both float32"},
  };
  // The layers are on no list of the header: PyTorch's CUDA autocast wraps their cuDNN
  // call (_cudnn_rnn, aten/src/ATen/cudnn/AutocastRNN.cpp), which casts to float16 whatever
  // the autocast dtype (Note [recurrent layers under CUDA autocast]).
  const std::set<std::string> cudnn_rnn_float16 = {"lstm", "gru", "rnn"};
  auto check = [&](const std::string& op, kernels::CastPolicy cuda) {
    INFO(op);
    CHECK((cuda == kernels::CastPolicy::Float16) == bool(cudnn_rnn_float16.count(op)));
    if (differs.count(op) || cudnn_rnn_float16.count(op)) return;
    for (const std::string& name : torch_names.count(op) ? torch_names.at(op) : std::vector<std::string>{op}) {
      INFO("PyTorch's " << name);
      CHECK((cuda == kernels::CastPolicy::LowerPrecision) == bool(lower.count(name)));
      CHECK((cuda == kernels::CastPolicy::Float32) == bool(fp32.count(name)));
    }
  };
  for (const auto& row : kernels::kAutocastOps) check(row.name, row.policy.cuda);
  for (const auto& row : kernels::kUnaryOps)
    if (row.backward_name) check(row.name, row.autocast.cuda);  // the user-facing unary ops
  for (const auto& row : kernels::kReduceOps) check(row.name, row.autocast.cuda);
  CHECK(kernels::op_info(kernels::BinaryOp::Pow).autocast.cuda == kernels::CastPolicy::Float32);

  // Run on the host-emulated cuda:0 (CPU kernels on tensors that carry the CUDA device):
  // float16 by default, softmax, layer_norm, exp, sum and the losses in float32. It
  // exists only in a build without the CUDA backend (core/cuda_emulation.h); on a GPU the
  // recurrent rows run in tests/test_rnn_16bit.cpp's "[.cuda]" case.
  if (built_with_cuda()) return;
  cuda::EmulationGuard emulate;
  auto cases = autocast_cases(kCUDA, kFloat16);
  amp::AutocastGuard amp(kCUDA);
  CHECK(amp::get_autocast_dtype(kCUDA) == kFloat16);
  const std::map<std::string, DType> expected = {
      {"matmul(f32,f32)", kFloat16}, {"linear(f32,f32,f32)", kFloat16}, {"matmul(f64,f64)", kFloat64},
      {"softmax(bf16)", kFloat32},   {"log_softmax(bf16)", kFloat32},   {"layer_norm(bf16,f32,f32)", kFloat32},
      {"exp(bf16)", kFloat32},       {"pow(bf16)", kFloat32},           {"tanh(bf16)", kFloat16},
      {"sum(bf16)", kFloat32},       {"cumsum(bf16)", kFloat32},        {"logsumexp(bf16)", kFloat32},
      {"mean(bf16)", kFloat16},      {"cross_entropy(bf16)", kFloat32}, {"mse_loss(bf16,f32)", kFloat32},
      {"linear_weight_grad", kFloat32},
      // The layers in float16, the cells in the autocast dtype (float16 here).
      {"lstm(f32)", kFloat16},      {"lstm_c_n(f32)", kFloat16},      {"rnn_tanh(f32)", kFloat16},
      {"rnn_relu(f32)", kFloat16},  {"gru(f32)", kFloat16},           {"gru(bf16)", kFloat16},
      {"lstm_cell(f32)", kFloat16}, {"lstm_cell(bf16)", kFloat16},    {"gru_cell(f32)", kFloat16},
      {"gru_cell(bf16)", kFloat16}, {"rnn_cell(f32)", kFloat16},
  };
  for (const auto& [name, dtype] : expected) {
    INFO(name);
    const Tensor y = cases.at(name)();
    CHECK(y.dtype() == dtype);
    CHECK(y.device() == kCUDA);
  }
  {
    // Under bfloat16 autocast the cells follow it, while the layers stay float16, as
    // PyTorch's cuDNN wrapper has them.
    amp::AutocastGuard bf16(kCUDA, kBFloat16);
    const std::map<std::string, DType> expected_bf16 = {
        {"lstm(f32)", kFloat16},       {"gru(bf16)", kFloat16},      {"rnn_relu(f32)", kFloat16},
        {"lstm_cell(f32)", kBFloat16}, {"gru_cell(f32)", kBFloat16}, {"rnn_cell(f32)", kBFloat16},
        {"matmul(f32,f32)", kBFloat16},
    };
    for (const auto& [name, dtype] : expected_bf16) {
      INFO(name << " under bfloat16 autocast");
      CHECK(cases.at(name)().dtype() == dtype);
    }
  }
  CHECK_FALSE(amp::is_autocast_enabled(kCPU));  // the CPU's state is separate
  CHECK(F::linear(randn({2, 6}), randn({3, 6})).dtype() == kFloat32);
}

TEST_CASE("autocast guards nest, restore, and reject a dtype that is not 16-bit", "[amp]") {
  const Tensor a = randn({3, 4}), b = randn({4, 2});
  CHECK_FALSE(amp::is_autocast_enabled(kCPU));
  CHECK(matmul(a, b).dtype() == kFloat32);
  {
    amp::AutocastGuard outer(kCPU);
    CHECK(amp::is_autocast_enabled(kCPU));
    CHECK(matmul(a, b).dtype() == kBFloat16);
    {
      amp::AutocastGuard off(kCPU, std::nullopt, /*enabled=*/false);
      CHECK_FALSE(amp::is_autocast_enabled(kCPU));
      CHECK(matmul(a, b).dtype() == kFloat32);
    }
    {
      amp::AutocastGuard half(kCPU, kFloat16);
      CHECK(matmul(a, b).dtype() == kFloat16);
    }
    CHECK(matmul(a, b).dtype() == kBFloat16);
    CHECK(amp::get_autocast_dtype(kCPU) == kBFloat16);
  }
  CHECK_FALSE(amp::is_autocast_enabled(kCPU));
  CHECK(matmul(a, b).dtype() == kFloat32);
  require_throws_with<DTypeError>([] { amp::AutocastGuard g(kCPU, kFloat32); }, {"autocast", "float32", "bfloat16"});
  CHECK_FALSE(amp::is_autocast_enabled(kCPU));  // a refused guard changes nothing
}

TEST_CASE("autocast casts a parameter once per region and computes what bfloat16 inputs give", "[amp]") {
  manual_seed(6);
  const Tensor x = randn({5, 8});
  const Tensor w = randn({3, 8}).requires_grad_(true), b = randn({3}).requires_grad_(true);
  Tensor y1, y2;
  {
    amp::AutocastGuard amp(kCPU);
    y1 = F::linear(x, w, b);
    y2 = F::linear(x * 2, w, b);
    CHECK(amp::autocast_cache_size() == 2);  // w and b, cast once for both calls
    CHECK(x.matmul(randn({8, 2})).dtype() == kBFloat16);
    CHECK(amp::autocast_cache_size() == 2);  // x and the right operand are no parameters
  }
  CHECK(amp::autocast_cache_size() == 0);  // emptied when the region ends
  // The values are the product of bfloat16-rounded operands (float accumulation).
  const Tensor ref = x.to(kBFloat16).to(kFloat64).matmul(w.detach().to(kBFloat16).to(kFloat64).t()) +
                     b.detach().to(kBFloat16).to(kFloat64);
  check_close(y1.to(kFloat64), values(ref), kBFloat16, "linear under autocast");
  // Backward (outside the region, as usual) reaches the float32 parameters in float32,
  // through both uses of the one cached cast.
  (y1.to(kFloat32).sum() + y2.to(kFloat32).sum()).backward();
  REQUIRE(w.grad().dtype() == kFloat32);
  const Tensor gw = (x.to(kBFloat16).to(kFloat32) + (x * 2).to(kBFloat16).to(kFloat32)).sum(0).expand({3, 8});
  check_close(w.grad(), values(gw), kBFloat16, "weight gradient");
  check_close(b.grad(), std::vector<double>{10, 10, 10}, kFloat32, "bias gradient");
}

TEST_CASE("backward inside an autocast region runs in the forward's dtypes", "[amp]") {
  manual_seed(7);
  const Tensor x = randn({4, 6});
  Tensor w = randn({6, 3}).requires_grad_(true);
  Tensor grad_outside, grad_inside;
  {
    amp::AutocastGuard amp(kCPU);
    F::cross_entropy(x.matmul(w), tensor<int64_t>({0, 1, 2, 1})).backward();
  }
  grad_outside = w.grad().clone();
  w.mutable_grad() = Tensor();
  {
    amp::AutocastGuard amp(kCPU);
    Tensor loss = F::cross_entropy(x.matmul(w), tensor<int64_t>({0, 1, 2, 1}));
    loss.backward();  // the engine suspends autocast: matmul's backward casts nothing
  }
  grad_inside = w.grad();
  CHECK(grad_inside.dtype() == kFloat32);
  CHECK(grad_inside.to_vector<float>() == grad_outside.to_vector<float>());
}

// ---- GradScaler ----------------------------------------------------------------------------

TEST_CASE("GradScaler follows PyTorch's schedule of scales and skipped steps", "[amp]") {
  const nlohmann::json g = golden_json("grad_scaler");
  const auto xs = g.at("x").get<std::vector<float>>(), ys = g.at("y").get<std::vector<float>>();
  const Tensor x = from_vector(xs, {8, 3}), y = from_vector(ys, {8, 2});
  Tensor w = from_vector(g.at("init").at("weight").get<std::vector<float>>(), {2, 3}).requires_grad_(true);
  Tensor b = from_vector(g.at("init").at("bias").get<std::vector<float>>(), {2}).requires_grad_(true);
  const auto& o = g.at("options");
  optim::SGD opt({w, b}, o.at("lr").get<double>());
  amp::GradScaler scaler({.init_scale = o.at("init_scale").get<double>(),
                          .growth_factor = o.at("growth_factor").get<double>(),
                          .backoff_factor = o.at("backoff_factor").get<double>(),
                          .growth_interval = o.at("growth_interval").get<int64_t>()});
  const std::map<int, float> poison = {{2, INFINITY}, {3, NAN}, {8, -INFINITY}};
  const auto& steps = g.at("steps");
  for (int step = 0; step < int(steps.size()); ++step) {
    INFO("step " << step);
    opt.zero_grad();
    scaler.scale(F::mse_loss(F::linear(x, w, b), y)).backward();
    if (poison.count(step)) {
      NoGradGuard no_grad;
      w.grad().select(0, 0).select(0, 1).fill_(poison.at(step));
    }
    const std::vector<float> before = w.to_vector<float>();
    const bool stepped = scaler.step(opt);
    scaler.update();
    CHECK(stepped == steps[size_t(step)].at("stepped").get<bool>());
    CHECK((w.to_vector<float>() != before) == stepped);  // a skipped step leaves w as it was
    CHECK(scaler.get_scale() == steps[size_t(step)].at("scale").get<double>());
    CHECK(scaler.get_growth_tracker() == steps[size_t(step)].at("growth_tracker").get<int64_t>());
  }
  check_close(w, g.at("final").at("weight").get<std::vector<double>>(), kFloat32, "final weight");
  check_close(b, g.at("final").at("bias").get<std::vector<double>>(), kFloat32, "final bias");
}

TEST_CASE("GradScaler: unscale_ gives true gradients, a skipped step leaves Adam's state alone", "[amp]") {
  manual_seed(8);
  Tensor p = randn({4, 3}).requires_grad_(true);
  const Tensor target = randn({4, 3});
  optim::Adam adam({p}, 0.01);
  amp::GradScaler scaler({.init_scale = 256.0});
  // One good step, for a state to keep.
  scaler.scale(F::mse_loss(p, target)).backward();
  CHECK(scaler.step(adam));
  scaler.update();
  adam.zero_grad();
  // unscale_ divides by the scale: the gradient equals the unscaled loss's.
  scaler.scale(F::mse_loss(p, target)).backward();
  scaler.unscale_(adam);
  const Tensor expected = (p.detach() - target) * (2.0 / 12);
  check_close(p.grad(), values(expected), kFloat32, "unscaled gradient");
  require_throws_with<ValueError>([&] { scaler.unscale_(adam); }, {"unscale_", "already"});
  CHECK(scaler.step(adam));
  scaler.update();
  // Now a NaN in the scaled gradient: the step is skipped, parameter and every state
  // tensor unchanged.
  adam.zero_grad();
  scaler.scale(F::mse_loss(p, target)).backward();
  {
    NoGradGuard no_grad;
    p.grad().select(0, 2).select(0, 0).fill_(NAN);
  }
  const std::vector<float> p_before = p.to_vector<float>();
  std::map<std::string, std::vector<float>> state_before;
  for (const auto& [key, t] : adam.state_dict()) state_before[key] = t.to(kFloat32).reshape({-1}).to_vector<float>();
  CHECK_FALSE(scaler.step(adam));
  require_throws_with<ValueError>([&] { scaler.step(adam); }, {"step", "already"});
  scaler.update();
  CHECK(scaler.get_scale() == 128.0);  // backed off from 256
  CHECK(p.to_vector<float>() == p_before);
  for (const auto& [key, t] : adam.state_dict())
    CHECK(t.to(kFloat32).reshape({-1}).to_vector<float>() == state_before.at(key));
  require_throws_with<ValueError>([&] { scaler.update(); }, {"update", "no inf checks"});
}

TEST_CASE("GradScaler: options, errors, state_dict and a disabled scaler", "[amp]") {
  require_throws_with<ValueError>([] { amp::GradScaler({.init_scale = 0}); }, {"init_scale", "0"});
  require_throws_with<ValueError>([] { amp::GradScaler({.growth_factor = 1.0}); }, {"growth_factor"});
  require_throws_with<ValueError>([] { amp::GradScaler({.backoff_factor = 1.5}); }, {"backoff_factor", "1.5"});
  require_throws_with<ValueError>([] { amp::GradScaler({.growth_interval = 0}); }, {"growth_interval"});

  Tensor p = randn({3}).requires_grad_(true);
  optim::SGD opt({p}, 0.1);
  amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 5});
  CHECK(scaler.get_scale() == 8.0);
  require_throws_with<ValueError>([&] { scaler.unscale_(opt); }, {"scale(loss) first"});
  Tensor scaled = scaler.scale((p * 3).sum().to(kBFloat16));
  CHECK(scaled.dtype() == kFloat32);
  CHECK(scaled.item<float>() == Approx(8.0 * (p * 3).sum().to(kBFloat16).item<float>()));
  scaled.backward();
  CHECK(p.grad().to_vector<float>() == std::vector<float>{24, 24, 24});
  CHECK(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_growth_tracker() == 1);

  // A float16 gradient is refused before anything changes.
  Tensor h = randn({2}).to(kFloat16).requires_grad_(true);
  optim::SGD opt16({h}, 0.1);
  scaler.scale(h.to(kFloat32).sum()).backward();
  const std::vector<float> g16 = h.grad().to_vector<float>();
  require_throws_with<DTypeError>([&] { scaler.unscale_(opt16); }, {"float16 gradient", "float32"});
  CHECK(h.grad().to_vector<float>() == g16);

  // state_dict round trip, and hostile states refused whole.
  optim::StateDict s = scaler.state_dict();
  CHECK(s.at("scale").item<double>() == 8.0);
  CHECK(s.at("_growth_tracker").item<int64_t>() == 1);
  CHECK(s.at("growth_interval").item<int64_t>() == 5);
  amp::GradScaler other;
  other.load_state_dict(s);
  CHECK(other.get_scale() == 8.0);
  CHECK(other.get_growth_tracker() == 1);
  CHECK(other.options().growth_interval == 5);
  optim::StateDict bad = s;
  bad.at("_growth_tracker") = scalar_tensor(int64_t(5), kInt64);
  require_throws_with<ValueError>([&] { other.load_state_dict(bad); }, {"_growth_tracker", "[0, growth_interval = 5)"});
  bad = s;
  bad.at("scale") = scalar_tensor(-1.0, kFloat64);
  require_throws_with<ValueError>([&] { other.load_state_dict(bad); }, {"load_state_dict", "'scale'", "-1"});
  bad = s;
  bad.at("growth_factor") = scalar_tensor(2.0, kFloat32);
  require_throws_with<ValueError>([&] { other.load_state_dict(bad); }, {"growth_factor", "float64"});
  bad = s;
  bad["extra"] = scalar_tensor(1.0, kFloat64);
  require_throws_with<ValueError>([&] { other.load_state_dict(bad); }, {"unexpected key 'extra'"});
  require_throws_with<ValueError>([&] { other.load_state_dict({}); }, {"empty"});
  CHECK(other.get_scale() == 8.0);  // every refused load changed nothing

  // Disabled: the loss as it is, step() steps, the state is empty.
  amp::GradScaler off({.enabled = false});
  const Tensor loss = p.sum();
  CHECK(off.scale(loss).data() == loss.data());
  CHECK(off.get_scale() == 1.0);
  CHECK(off.state_dict().empty());
}

TEST_CASE("GradScaler goes into a training checkpoint, and a bad scaler entry changes nothing", "[amp]") {
  manual_seed(11);
  nn::Linear model(4, 2);
  optim::SGD opt(model->parameters(), 0.1);
  amp::GradScaler scaler({.init_scale = 64.0, .growth_interval = 2});
  const Tensor x = randn({6, 4}), y = randn({6, 2});
  for (int step = 0; step < 3; ++step) {  // 64 -> 128 after two good steps, one more good step
    opt.zero_grad();
    scaler.scale(F::mse_loss(model->forward(x), y)).backward();
    scaler.step(opt);
    scaler.update();
  }
  REQUIRE(scaler.get_scale() == 128.0);
  REQUIRE(scaler.get_growth_tracker() == 1);
  const std::string path = "amp_checkpoint.safetensors";
  optim::save_checkpoint(path, {.model = model.ptr().get(), .optimizer = &opt, .step = 3, .scaler = &scaler});

  nn::Linear other(4, 2);
  optim::SGD other_opt(other->parameters(), 0.1);
  amp::GradScaler restored;
  const optim::TrainingState s = optim::load_checkpoint(path, {.model = other.ptr().get(), .optimizer = &other_opt, .scaler = &restored});
  CHECK(s.step == 3);
  CHECK(restored.get_scale() == 128.0);
  CHECK(restored.get_growth_tracker() == 1);
  CHECK(restored.options().growth_interval == 2);

  // A checkpoint whose scaler entry is out of range: refused, the model and scaler untouched.
  SafetensorsFile f = load_safetensors(path);
  f.tensors["scaler._growth_tracker"] = scalar_tensor(int64_t(7), kInt64);
  save_safetensors(path, f.tensors, f.metadata);
  nn::Linear fresh(4, 2);
  const std::vector<float> before = fresh->weight.to_vector<float>();
  amp::GradScaler untouched({.init_scale = 4.0});
  require_throws_with<SerializationError>(
      [&] { optim::load_checkpoint(path, {.model = fresh.ptr().get(), .scaler = &untouched}); },
      {path, "scaler.", "_growth_tracker"});
  CHECK(fresh->weight.to_vector<float>() == before);
  CHECK(untouched.get_scale() == 4.0);
  std::remove(path.c_str());
}

TEST_CASE("float16 autocast: gradients that underflow without the scaler train with it", "[amp]") {
  // A loss this small has float16 gradients below float16's smallest subnormal (6e-8):
  // backward through the float16 matmul gives exact zeros unless the loss is scaled (by
  // 2^24 here, which brings them into float16's normal range).
  manual_seed(9);
  const Tensor x = randn({16, 4}), y = randn({16, 2});
  const Tensor w0 = randn({2, 4});
  auto train = [&](bool use_scaler, std::vector<double>* losses) {
    Tensor w = w0.clone().requires_grad_(true);
    optim::SGD opt({w}, 1e9);  // a learning rate to match the tiny loss
    amp::GradScaler scaler({.init_scale = 16777216.0, .enabled = use_scaler});
    Tensor first_grad;
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard amp(kCPU, kFloat16);
        loss = F::mse_loss(F::linear(x, w), y) * 1e-10;
      }
      losses->push_back(loss.item<double>());
      scaler.scale(loss).backward();
      CHECK(scaler.step(opt));  // unscales first: w.grad() is the true gradient after it
      if (!first_grad.defined()) first_grad = w.grad().clone();
      scaler.update();
    }
    return first_grad;
  };
  std::vector<double> plain_losses, scaled_losses;
  const Tensor plain = train(false, &plain_losses);
  const Tensor scaled = train(true, &scaled_losses);
  CHECK(plain.abs().sum().item<double>() == 0.0);  // underflowed: nothing to learn from
  CHECK(plain_losses.back() == plain_losses.front());
  // With the scaler: the float32 gradient of the same loss, within float16 rounding.
  Tensor w = w0.clone().requires_grad_(true);
  (F::mse_loss(F::linear(x, w), y) * 1e-10).backward();
  REQUIRE(scaled.abs().sum().item<double>() > 0);
  check_close(scaled, values(w.grad()), kFloat16, "scaled float16 gradient");
  CHECK(scaled_losses.back() < 0.5 * scaled_losses.front());
}

// ---- on a GPU ------------------------------------------------------------------------------

TEST_CASE("cuda amp: isfinite ops, the scaler's kernels and float16 autocast match the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(10);
  // isfinite / isnan / isinf / nan_to_num, float32 and float16, odd size.
  Tensor x = randn({1000003});
  {
    NoGradGuard no_grad;
    x.select(0, 7).fill_(NAN);
    x.select(0, 99).fill_(INFINITY);
    x.select(0, 1000002).fill_(-INFINITY);
  }
  for (DType dt : {kFloat32, kFloat16}) {
    INFO(dtype_name(dt));
    const Tensor c = x.to(dt), g = c.to(kCUDA);
    CHECK(g.isfinite().cpu().to_vector<bool>() == c.isfinite().to_vector<bool>());
    CHECK(g.isnan().cpu().to_vector<bool>() == c.isnan().to_vector<bool>());
    CHECK(g.isinf().cpu().to_vector<bool>() == c.isinf().to_vector<bool>());
    CHECK(g.nan_to_num(1, 2, -3).cpu().to(kFloat32).to_vector<float>() ==
          c.nan_to_num(1, 2, -3).to(kFloat32).to_vector<float>());
  }
  // unscale_grads: the same values and flag as the CPU loop.
  for (bool poison : {false, true}) {
    Tensor cpu_g = randn({4099}) * 1024.0;
    if (poison) cpu_g.select(0, 4098).fill_(NAN);
    Tensor gpu_g = cpu_g.to(kCUDA);
    Tensor cpu_found = zeros({1}), gpu_found = zeros({1}, TensorOptions(kFloat32).device(kCUDA));
    const Tensor inv = full({1}, 1.0 / 1024);
    kernels::unscale_grads({cpu_g}, cpu_found, inv);
    kernels::unscale_grads({gpu_g}, gpu_found, inv.to(kCUDA));
    CHECK(gpu_found.item<float>() == cpu_found.item<float>());
    CHECK(gpu_found.item<float>() == float(poison));
    CHECK(gpu_g.cpu().isnan().to_vector<bool>() == cpu_g.isnan().to_vector<bool>());
    CHECK(allclose(gpu_g.cpu().nan_to_num(), cpu_g.nan_to_num(), 0, 0));
  }
  // The golden schedule on the GPU: the scale and growth tracker live there.
  const nlohmann::json g = golden_json("grad_scaler");
  const Tensor xs = from_vector(g.at("x").get<std::vector<float>>(), {8, 3}).to(kCUDA);
  const Tensor ys = from_vector(g.at("y").get<std::vector<float>>(), {8, 2}).to(kCUDA);
  Tensor w = from_vector(g.at("init").at("weight").get<std::vector<float>>(), {2, 3}).to(kCUDA).requires_grad_(true);
  Tensor b = from_vector(g.at("init").at("bias").get<std::vector<float>>(), {2}).to(kCUDA).requires_grad_(true);
  optim::SGD opt({w, b}, 0.1);
  amp::GradScaler scaler({.init_scale = 1024.0, .backoff_factor = 0.25, .growth_interval = 3});
  const std::map<int, float> poison = {{2, INFINITY}, {3, NAN}, {8, -INFINITY}};
  for (int step = 0; step < 12; ++step) {
    opt.zero_grad();
    scaler.scale(F::mse_loss(F::linear(xs, w, b), ys)).backward();
    if (poison.count(step)) {
      NoGradGuard no_grad;
      w.grad().select(0, 0).select(0, 1).fill_(poison.at(step));
    }
    CHECK(scaler.step(opt) == g.at("steps")[size_t(step)].at("stepped").get<bool>());
    scaler.update();
    CHECK(scaler.get_scale() == g.at("steps")[size_t(step)].at("scale").get<double>());
  }
  check_close(w.cpu(), g.at("final").at("weight").get<std::vector<double>>(), kFloat32, "final weight on CUDA");
  // float16 autocast on the GPU: linear in float16, softmax in float32, as PyTorch's lists.
  {
    amp::AutocastGuard amp(kCUDA);
    const Tensor a = randn({33, 17}, TensorOptions().device(kCUDA)), m = randn({9, 17}, TensorOptions().device(kCUDA));
    const Tensor y = F::linear(a, m);
    CHECK(y.dtype() == kFloat16);
    CHECK(y.softmax(1).dtype() == kFloat32);
    check_close(y.cpu().to(kFloat64), values(a.cpu().to(kFloat16).to(kFloat64).matmul(m.cpu().to(kFloat16).to(kFloat64).t())),
                kFloat16, "float16 linear on CUDA");
  }
}
