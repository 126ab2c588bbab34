// Capturable optimizers on the host (Note [capturable optimizers] in optim/optimizer.h): the
// update math computed from lr and step tensors equals the eager formulas, a capturable
// optimizer's steps equal an eager one's bit for bit on the CPU (schedulers, GradScaler's
// skipped steps, checkpoints in both directions included), nothing in its step waits for the
// host-emulated device, and the packing of a list of tensors into launches covers every
// element once (Note [multi-tensor launches]).
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_emulation.h"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/math/optim_math.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "test_util.h"

using namespace loom;
using namespace loom::optim;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>, bool capturable)>;

const std::vector<std::pair<std::string, MakeOptimizer>>& optimizers() {
  static const std::vector<std::pair<std::string, MakeOptimizer>> all{
      {"SGD",
       [](std::vector<Tensor> p, bool c) {
         return std::make_unique<SGD>(std::move(p), SGDOptions(0.05).momentum(0.9).dampening(0.1).capturable(c));
       }},
      {"SGD nesterov",
       [](std::vector<Tensor> p, bool c) {
         return std::make_unique<SGD>(std::move(p),
                                      SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(0.01).capturable(c));
       }},
      {"Adam",
       [](std::vector<Tensor> p, bool c) {
         return std::make_unique<Adam>(std::move(p),
                                       AdamOptions(0.01).betas(0.8, 0.99).weight_decay(0.02).capturable(c));
       }},
      {"AdamW amsgrad",
       [](std::vector<Tensor> p, bool c) {
         return std::make_unique<AdamW>(std::move(p), AdamOptions(0.01).amsgrad(true).capturable(c));
       }},
      {"RMSprop centered",
       [](std::vector<Tensor> p, bool c) {
         return std::make_unique<RMSprop>(
             std::move(p), RMSpropOptions(0.01).momentum(0.5).centered(true).weight_decay(0.01).capturable(c));
       }},
  };
  return all;
}

// Parameters of three dtypes; the last one has no gradient every third step.
std::vector<Tensor> make_params(Device device) {
  manual_seed(41);
  std::vector<Tensor> params;
  for (auto [shape, dtype] : {std::pair<Shape, DType>{{300}, kFloat32}, {{4, 5}, kFloat64}, {{9}, kBFloat16},
                              {{2, 3}, kFloat32}})
    params.push_back(test::random_nonzero(shape, dtype).to(device).requires_grad_(true));
  return params;
}

void set_grads(std::vector<Tensor>& params, int step, double scale = 1.0) {
  for (size_t j = 0; j < params.size(); ++j) {
    const bool skip = j + 1 == params.size() && step % 3 == 1;
    const Tensor g = (test::random_nonzero(params[j].sizes(), kFloat64) * scale).to(params[j].dtype());
    params[j].mutable_grad() = skip ? Tensor() : g.to(params[j].device());
  }
}

// Every parameter and state buffer of b equals a's, bit for bit; step counts as numbers
// (an eager count is an int64, a capturable one a float64).
void require_same(const std::vector<Tensor>& a, const Optimizer& oa, const std::vector<Tensor>& b,
                  const Optimizer& ob, const std::string& at) {
  for (size_t j = 0; j < a.size(); ++j) {
    INFO(at << " parameter " << j);
    const Tensor want = a[j].detach().cpu().to(kFloat64), got = b[j].detach().cpu().to(kFloat64);
    REQUIRE(got.to_vector<double>() == want.to_vector<double>());
  }
  const StateDict sa = oa.state_dict(), sb = ob.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (const auto& [key, t] : sa) {
    INFO(at << " " << key);
    REQUIRE(sb.count(key) == 1);
    CHECK(sb.at(key).cpu().to(kFloat64).to_vector<double>() == t.cpu().to(kFloat64).to_vector<double>());
  }
}

}  // namespace

TEST_CASE("capturable optimizers: update_math is the eager formulas", "[optim]") {
  // The expressions the optimizers computed inline before update_math served both kinds.
  const kernels::AdamHyper adam{0.85, 0.995, 1e-8, 0.01, true, false};
  for (double lr : {1e-3, 0.37, 3.0})
    for (double step = 1; step <= 5000; step += step < 20 ? 1 : 97) {
      const kernels::AdamMath<double> m = kernels::update_math(adam, lr, step);
      CHECK(m.step_size == lr / (1 - std::pow(0.85, step)));
      CHECK(m.bias_correction2_sqrt == std::sqrt(1 - std::pow(0.995, step)));
      CHECK((m.lr == lr && m.beta1 == 0.85 && m.beta2 == 0.995 && m.eps == 1e-8 && m.weight_decay == 0.01 &&
             m.decoupled && !m.amsgrad));
    }
  const kernels::SgdMath<double> sgd = kernels::update_math(kernels::SgdHyper{0.9, 0.1, 0.01, true, false}, 0.5, 7);
  CHECK((sgd.lr == 0.5 && sgd.momentum == 0.9 && sgd.dampening == 0.1 && sgd.weight_decay == 0.01 && sgd.nesterov &&
         !sgd.first_step));
  const kernels::RmspropMath<double> rms =
      kernels::update_math(kernels::RmspropHyper{0.9, 1e-6, 0.02, 0.5, true}, 0.25, 3);
  CHECK((rms.lr == 0.25 && rms.alpha == 0.9 && rms.eps == 1e-6 && rms.weight_decay == 0.02 && rms.momentum == 0.5 &&
         rms.centered));
}

TEST_CASE("capturable optimizers: the same steps as eager ones on the CPU, bit for bit, under a scheduler",
          "[optim]") {
  for (const auto& [name, make] : optimizers()) {
    std::vector<Tensor> eager_params = make_params(kCPU), capturable_params = make_params(kCPU);
    std::unique_ptr<Optimizer> eager = make(eager_params, false), capturable = make(capturable_params, true);
    REQUIRE(capturable->capturable());
    REQUIRE_FALSE(eager->capturable());
    StepLR eager_schedule(*eager, 3, 0.5), capturable_schedule(*capturable, 3, 0.5);
    for (int step = 0; step < 12; ++step) {
      manual_seed(100 + step);
      set_grads(eager_params, step);
      manual_seed(100 + step);
      set_grads(capturable_params, step);
      if (step == 7) {  // an lr assigned directly, as a PyTorch script may: read at the next step
        eager->param_groups()[0].lr = 0.002;
        capturable->param_groups()[0].lr = 0.002;
      }
      eager->step();
      capturable->step();
      eager_schedule.step();
      capturable_schedule.step();
      require_same(eager_params, *eager, capturable_params, *capturable, name + " step " + std::to_string(step));
    }
    // The device copy of the lr follows the host's.
    const ParamGroup& group = capturable->param_groups()[0];
    REQUIRE(group.device_lr.defined());
    CHECK(group.device_lr.item<double>() == group.lr);
  }
}

TEST_CASE("capturable optimizers: GradScaler's skipped step changes nothing, decided by the step's kernels",
          "[optim]") {
  for (const auto& [name, make] : optimizers()) {
    std::vector<Tensor> eager_params = make_params(kCPU), capturable_params = make_params(kCPU);
    for (std::vector<Tensor>* params : {&eager_params, &capturable_params})
      for (Tensor& p : *params) p.set_data(p.detach().to(kFloat32));  // GradScaler: no 16-bit gradients
    std::unique_ptr<Optimizer> eager = make(eager_params, false), capturable = make(capturable_params, true);
    amp::GradScaler eager_scaler({.init_scale = 64.0, .growth_interval = 2});
    amp::GradScaler capturable_scaler({.init_scale = 64.0, .growth_interval = 2});
    for (int step = 0; step < 8; ++step) {
      for (std::vector<Tensor>* params : {&eager_params, &capturable_params}) {
        manual_seed(7 + step);
        set_grads(*params, step, 64.0);
        if (step == 2 || step == 5) {  // not finite: the step is skipped, the scale backs off
          NoGradGuard no_grad;
          (*params)[1].mutable_grad().view({-1}).narrow(0, 3, 1).fill_(step == 2 ? INFINITY : NAN);
        }
      }
      (void)eager_scaler.scale(zeros({1}));  // (the scale lives where the first scaled loss does)
      (void)capturable_scaler.scale(zeros({1}));
      CHECK(eager_scaler.step(*eager) == (step != 2 && step != 5));
      CHECK(capturable_scaler.step(*capturable));  // queued: the kernels decide
      eager_scaler.update();
      capturable_scaler.update();
      CHECK(capturable_scaler.get_scale() == eager_scaler.get_scale());
      // The same parameters, buffers and counts; "step" (calls of step()) counts the
      // capturable optimizer's skipped steps as calls.
      for (size_t j = 0; j < eager_params.size(); ++j) {
        INFO(name << " step " << step << " parameter " << j);
        REQUIRE(capturable_params[j].detach().to_vector<float>() == eager_params[j].detach().to_vector<float>());
      }
      StateDict want = eager->state_dict(), got = capturable->state_dict();
      CHECK(got.at("step").item<int64_t>() == step + 1);
      want.erase("step");
      got.erase("step");
      REQUIRE(got.size() == want.size());
      for (const auto& [key, t] : want) {
        INFO(name << " step " << step << " " << key);
        CHECK(got.at(key).to(kFloat64).to_vector<double>() == t.to(kFloat64).to_vector<double>());
      }
    }
  }
}

TEST_CASE("capturable optimizers: checkpoints load across the two kinds and continue the same steps", "[optim]") {
  for (const auto& [name, make] : optimizers()) {
    INFO(name);
    for (bool from_capturable : {false, true}) {
      std::vector<Tensor> a = make_params(kCPU);
      std::unique_ptr<Optimizer> first = make(a, from_capturable);
      for (int step = 0; step < 4; ++step) {
        manual_seed(step);
        set_grads(a, step);
        first->step();
      }
      // The other kind takes over from a copy of the parameters and the state dict.
      std::vector<Tensor> b;
      for (const Tensor& p : a) b.push_back(p.detach().clone().requires_grad_(true));
      std::unique_ptr<Optimizer> second = make(b, !from_capturable);
      second->load_state_dict(first->state_dict());
      for (int step = 4; step < 8; ++step) {
        manual_seed(step);
        set_grads(a, step);
        manual_seed(step);
        set_grads(b, step);
        first->step();
        second->step();
        require_same(a, *first, b, *second, name + " resumed at step " + std::to_string(step));
      }
    }
  }
}

TEST_CASE("capturable optimizers: a list of tensors is cut into launches that cover each element once",
          "[optim][cuda_host]") {
  using namespace loom::kernels::cuda;
  std::vector<int64_t> numel;
  const int64_t sizes[] = {1, kListChunk - 1, kListChunk, kListChunk + 1, 3 * kListChunk + 5, 0, 77};
  for (int64_t n : sizes)
    for (int copies = 0; copies < 9; ++copies) numel.push_back(n + (n > 0 ? copies : 0));
  std::vector<std::vector<int>> seen(numel.size());
  for (size_t i = 0; i < numel.size(); ++i) seen[i].assign(size_t(numel[i]), 0);
  size_t next = 0;  // tensors come in order
  int launches = 0;
  for_each_list_launch(numel, [&](const ListChunks& chunks, const std::vector<size_t>& which) {
    ++launches;
    REQUIRE(chunks.count == int(which.size()));
    REQUIRE((chunks.count >= 1 && chunks.count <= kMaxListTensors));
    for (size_t w : which) {
      while (numel[next] == 0) ++next;  // empty tensors are skipped
      REQUIRE(w == next++);
    }
    for (int block = 0; block < chunks.blocks(); ++block) {  // the grid, as the kernels walk it
      int64_t begin = 0, end = 0;
      const int t = chunks.tensor_of(block, begin, end);
      REQUIRE((t >= 0 && t < chunks.count));
      REQUIRE((0 <= begin && begin < end && end <= numel[which[size_t(t)]] && end - begin <= kListChunk));
      for (int64_t e = begin; e < end; ++e) ++seen[which[size_t(t)]][size_t(e)];
    }
  });
  CHECK(launches == 3);  // 54 non-empty tensors: 24 + 24 + 6
  for (size_t i = 0; i < numel.size(); ++i)
    for (int count : seen[i]) REQUIRE(count == 1);
}

#ifndef LOOM_WITH_CUDA

TEST_CASE("capturable optimizers: the unscale, inf check, step and scale update wait for nothing on cuda:0",
          "[cuda_emulation]") {
  for (bool capturable : {false, true}) {
    INFO((capturable ? "capturable" : "eager"));
    cuda::EmulationGuard emulate;
    std::vector<Tensor> params = make_params(kCUDA);
    for (Tensor& p : params) p.set_data(p.detach().to(kFloat32));
    std::unique_ptr<Optimizer> adam = optimizers()[2].second(params, capturable);
    amp::GradScaler scaler;
    StepLR schedule(*adam, 1, 0.9);
    for (int step = 0; step < 3; ++step) {
      set_grads(params, step, 65536.0);
      (void)scaler.scale(zeros({1}, TensorOptions().device(kCUDA)));
      const uint64_t before = cuda::host_sync_count();
      scaler.step(*adam);
      scaler.update();
      schedule.step();
      // An eager optimizer's step reads the flag (a GPU would wait); a capturable one's not.
      CHECK(cuda::host_sync_count() - before == (capturable ? 0u : 1u));
    }
  }
}


TEST_CASE("capturable optimizers: a group on two devices is refused before any parameter or count changes",
          "[cuda_emulation]") {
  cuda::EmulationGuard emulate;
  for (const auto& [name, make] : optimizers()) {
    INFO(name);
    // Two groups: the first is fine, the second has a parameter on each device.
    std::vector<Tensor> fine = make_params(kCPU);
    std::vector<Tensor> mixed = {test::random_nonzero({5}).requires_grad_(true),
                                 test::random_nonzero({5}).to(kCUDA).requires_grad_(true)};
    std::unique_ptr<Optimizer> opt = make(fine, true);
    opt->add_param_group(mixed, opt->param_groups()[0].lr);
    set_grads(fine, 0);
    set_grads(mixed, 0);
    std::vector<std::vector<double>> before;
    for (const Tensor& p : fine) before.push_back(p.detach().cpu().to(kFloat64).to_vector<double>());
    const size_t entries_before = opt->state_dict().size();
    REQUIRE_THROWS_WITH(opt->step(), Catch::Contains("one learning rate per group on one device") &&
                                         Catch::Contains("cpu") && Catch::Contains("cuda:0"));
    for (size_t j = 0; j < fine.size(); ++j)
      REQUIRE(fine[j].detach().cpu().to(kFloat64).to_vector<double>() == before[j]);
    REQUIRE(opt->state_dict().size() == entries_before);  // no state made, no count moved
  }
}

#endif
