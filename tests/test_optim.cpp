// Optimizers (SGD, Adam, AdamW, RMSprop), learning-rate schedulers and gradient clipping
// against PyTorch (fixtures written by tests/golden/make_optim_golden.py: every parameter
// at every step to 1e-5 in float32 and 1e-10 in float64, lr and momentum schedules to
// 1e-12), 16-bit parameters, zero_grad, state_dict round trips (bit for bit) and the
// hyper-parameter errors.
#include <cmath>
#include <functional>
#include <iomanip>
#include <memory>
#include <sstream>

#include "core/safetensors.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "test_util.h"

using namespace loom;
using namespace loom::optim;
using namespace loom::test;

namespace {

// ---- fixtures ------------------------------------------------------------------------------------

const TensorMap& fixture(const std::string& name) {
  return golden_file(name).tensors;
}

const Tensor& at(const TensorMap& f, const std::string& key) {
  INFO("fixture tensor " << key);
  REQUIRE(f.count(key) == 1);
  return f.at(key);
}

std::vector<double> vec(const Tensor& t) { return t.to_vector<double>(); }

// The cases of a fixture: the names before `suffix` of the keys that end with it.
std::vector<std::string> cases_with(const TensorMap& f, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& [key, t] : f)
    if (key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(key.substr(0, key.size() - suffix.size()));
  return out;
}

// |got - want| <= tol * (1 + |want|) elementwise.
void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                   const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
      FAIL(what << " element " << i << ": got " << std::setprecision(17) << got[i] << ", PyTorch " << want[i]);
    }
  }
}

double pytorch_tolerance(DType t) { return t == kFloat64 ? 1e-10 : 1e-5; }

// ---- optimizers built from a case ------------------------------------------------------------------

constexpr size_t kParams = 3;  // shapes (2, 3), (4,), ()

const TensorMap& trajectories() { return fixture("optim_trajectories"); }

std::string kind_of(const std::string& c) { return c.substr(0, c.find('_')); }

// The Loom optimizer of fixture case c (see make_optim_golden.py): hyper-parameters from
// <c>.hp (absent: the defaults), two param groups when <c>.group_lrs is given.
std::unique_ptr<Optimizer> make_optimizer(const std::string& c, const std::vector<Tensor>& params) {
  const TensorMap& f = trajectories();
  const bool defaults = f.count(c + ".hp") == 0;
  const bool groups = f.count(c + ".group_lrs") == 1;
  std::vector<double> h = defaults ? std::vector<double>{} : vec(at(f, c + ".hp"));
  std::vector<double> lrs = groups ? vec(at(f, c + ".group_lrs")) : std::vector<double>{};
  if (groups) h[0] = lrs[0];
  const std::vector<Tensor> first = groups ? std::vector<Tensor>{params[0]} : params;
  const std::string kind = kind_of(c);
  std::unique_ptr<Optimizer> opt;
  if (kind == "sgd") {
    opt = std::make_unique<SGD>(first, SGDOptions(h[0]).momentum(h[1]).dampening(h[2]).weight_decay(h[3]).nesterov(h[4] != 0));
  } else if (kind == "adam" || kind == "adamw") {
    const AdamOptions o = defaults ? AdamOptions()
                                   : AdamOptions(h[0]).betas(h[1], h[2]).eps(h[3]).weight_decay(h[4]).amsgrad(h[5] != 0);
    if (kind == "adam") opt = std::make_unique<Adam>(first, o);
    else opt = std::make_unique<AdamW>(first, o);
  } else {
    REQUIRE(kind == "rmsprop");
    const RMSpropOptions o = defaults ? RMSpropOptions()
                                      : RMSpropOptions(h[0]).alpha(h[1]).eps(h[2]).weight_decay(h[3]).momentum(h[4]).centered(h[5] != 0);
    opt = std::make_unique<RMSprop>(first, o);
  }
  if (groups) opt->add_param_group({params.begin() + 1, params.end()}, lrs[1]);
  return opt;
}

// hp: max_lr, pct_start, div_factor, final_div_factor, base_momentum, max_momentum, linear.
std::unique_ptr<OneCycleLR> make_one_cycle(Optimizer& opt, const std::vector<double>& hp, int64_t total_steps) {
  return std::make_unique<OneCycleLR>(opt, OneCycleOptions(hp[0], total_steps)
                                               .pct_start(hp[1])
                                               .div_factor(hp[2])
                                               .final_div_factor(hp[3])
                                               .momentum_range(hp[4], hp[5])
                                               .anneal_strategy(hp[6] != 0 ? "linear" : "cos"));
}

int64_t num_steps() { return at(trajectories(), "grad.0").size(0); }

std::vector<Tensor> initial_params(DType dtype) {
  std::vector<Tensor> out;
  for (size_t j = 0; j < kParams; ++j)
    out.push_back(at(trajectories(), "init." + std::to_string(j)).to(dtype).clone().requires_grad_(true));
  return out;
}

// Gives every parameter its gradient of step t in its dtype, or none where case c says so.
void feed_gradients(const std::string& c, const std::vector<Tensor>& params, int64_t t) {
  const TensorMap& f = trajectories();
  for (size_t j = 0; j < kParams; ++j) {
    const bool has = f.count(c + ".has_grad") == 0 || at(f, c + ".has_grad")[t][int64_t(j)].item<int64_t>() != 0;
    params[j].mutable_grad() =
        has ? at(f, "grad." + std::to_string(j)).select(0, t).to(params[j].dtype()).clone() : Tensor();
  }
}

// Runs case c in dtype, calling check(t, params) after each step.
void run_case(const std::string& c, DType dtype, const std::function<void(int64_t, const std::vector<Tensor>&)>& check) {
  const TensorMap& f = trajectories();
  std::vector<Tensor> params = initial_params(dtype);
  std::unique_ptr<Optimizer> opt = make_optimizer(c, params);
  std::unique_ptr<OneCycleLR> sched;
  if (f.count(c + ".onecycle")) sched = make_one_cycle(*opt, vec(at(f, c + ".onecycle")), num_steps());
  for (int64_t t = 0; t < num_steps(); ++t) {
    feed_gradients(c, params, t);
    opt->step();
    if (sched) sched->step();
    check(t, params);
  }
}

std::vector<std::string> optimizer_cases() { return cases_with(trajectories(), ".f32.0"); }

}  // namespace

// ---- trajectories against PyTorch ------------------------------------------------------------------

TEST_CASE("optimizers follow PyTorch's trajectories step by step", "[optim]") {
  const std::vector<std::string> cases = optimizer_cases();
  REQUIRE(cases.size() >= 20);
  for (const std::string& c : cases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      const std::string tag = dtype == kFloat32 ? ".f32." : ".f64.";
      run_case(c, dtype, [&](int64_t t, const std::vector<Tensor>& params) {
        for (size_t j = 0; j < kParams; ++j) {
          const std::vector<double> want = vec(at(trajectories(), c + tag + std::to_string(j)).select(0, t));
          std::ostringstream what;
          what << c << " " << dtype_name(dtype) << " step " << t + 1 << " parameter " << j;
          require_close(vec(params[j]), want, pytorch_tolerance(dtype), what.str());
        }
      });
    }
  }
}

TEST_CASE("optimizers update a parameter of many vector runs as they update each element alone", "[optim]") {
  // 10,007 elements: two whole runs of the CPU loop and a partial one (Note [vectorised
  // optimizer updates]); the same values as 10,007 one-element parameters take the loop's
  // remainder path. Each case's options from the PyTorch trajectories; 3 steps.
  manual_seed(41);
  const int64_t n = 10007;
  for (const std::string& c : optimizer_cases()) {
    if (trajectories().count(c + ".group_lrs")) continue;  // two param groups: one parameter here
    for (DType dtype : {kFloat32, kFloat64}) {
      INFO(c << " " << dtype_name(dtype));
      const Tensor init = randn({n}, dtype);
      std::vector<Tensor> big = {init.clone().requires_grad_(true)}, small;
      for (int64_t i = 0; i < n; ++i) small.push_back(init.narrow(0, i, 1).clone().requires_grad_(true));
      std::unique_ptr<Optimizer> big_opt = make_optimizer(c, big), small_opt = make_optimizer(c, small);
      for (int step = 0; step < 3; ++step) {
        const Tensor grad = randn({n}, dtype);
        big[0].mutable_grad() = grad.clone();
        for (int64_t i = 0; i < n; ++i) small[size_t(i)].mutable_grad() = grad.narrow(0, i, 1).clone();
        big_opt->step();
        small_opt->step();
      }
      std::vector<double> each;
      for (const Tensor& p : small) each.push_back(p.item<double>());
      require_close(vec(big[0]), each, dtype == kFloat32 ? 1e-6 : 1e-14, c);
    }
  }
}

TEST_CASE("optimizers update float16 and bfloat16 parameters close to float32", "[optim]") {
  for (const std::string& c : optimizer_cases()) {
    for (DType dtype : {kFloat16, kBFloat16}) {
      // The parameter and its state round to 16 bits each step: the error grows with the
      // number of steps, a few units of the last place of values near 1.
      const double tol = dtype == kFloat16 ? 5e-3 : 4e-2;
      run_case(c, dtype, [&](int64_t t, const std::vector<Tensor>& params) {
        for (size_t j = 0; j < kParams; ++j) {
          REQUIRE(params[j].dtype() == dtype);
          const std::vector<double> want = vec(at(trajectories(), c + ".f32." + std::to_string(j)).select(0, t));
          std::ostringstream what;
          what << c << " " << dtype_name(dtype) << " step " << t + 1 << " parameter " << j;
          require_close(vec(params[j]), want, tol, what.str());
        }
      });
    }
  }
}

TEST_CASE("optimizers keep only the state their options need, and a step count per parameter", "[optim]") {
  auto keys = [](const std::string& c) {
    std::vector<Tensor> params = initial_params(kFloat32);
    std::unique_ptr<Optimizer> opt = make_optimizer(c, params);
    feed_gradients(c, params, 0);
    opt->step();
    std::vector<std::string> out;
    for (const auto& [k, t] : opt->state_dict())
      if (k.rfind("state.0.", 0) == 0) out.push_back(k.substr(8));
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(keys("sgd") == V{});
  CHECK(keys("sgd_momentum") == V{"momentum_buffer"});
  CHECK(keys("adam") == V{"exp_avg", "exp_avg_sq", "step"});
  CHECK(keys("adam_amsgrad") == V{"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"});
  CHECK(keys("rmsprop") == V{"square_avg"});
  CHECK(keys("rmsprop_all") == V{"grad_avg", "momentum_buffer", "square_avg"});

  // A parameter without a gradient is skipped: its count does not advance (as PyTorch's).
  std::vector<Tensor> params = initial_params(kFloat32);
  Adam adam(params, AdamOptions(0.01));
  feed_gradients("adam", params, 0);
  params[2].mutable_grad() = Tensor();
  adam.step();
  adam.step();
  const StateDict s = adam.state_dict();
  CHECK(s.at("state.0.step").item<int64_t>() == 2);
  CHECK(s.count("state.2.step") == 0);
  CHECK(s.at("step").item<int64_t>() == 2);
  CHECK(s.at("state.0.step").dtype() == kInt64);
}

TEST_CASE("AdamW defaults to weight_decay 0.01 with options too, Adam to 0", "[optim]") {
  std::vector<Tensor> params = initial_params(kFloat32);
  CHECK(AdamW(params, AdamOptions(1e-3)).options.weight_decay_.value() == 1e-2);
  CHECK(AdamW(params, 1e-3).options.weight_decay_.value() == 1e-2);
  CHECK(AdamW(params, AdamOptions().weight_decay(0.0)).options.weight_decay_.value() == 0.0);
  CHECK(Adam(params, AdamOptions()).options.weight_decay_.value() == 0.0);
}

// ---- schedulers against PyTorch -----------------------------------------------------------------------

namespace {

const TensorMap& schedules() { return fixture("optim_schedulers"); }

// The scheduler fixture's optimizer: two groups with lr 0.1 and 0.02 (make_optim_golden.py).
std::unique_ptr<Optimizer> schedule_optimizer(const std::string& c, const std::vector<Tensor>& params) {
  std::unique_ptr<Optimizer> opt;
  if (c.find("adam") != std::string::npos) opt = std::make_unique<Adam>(std::vector<Tensor>{params[0]}, AdamOptions(0.1).betas(0.9, 0.99));
  else if (c.find("rmsprop") != std::string::npos) opt = std::make_unique<RMSprop>(std::vector<Tensor>{params[0]}, RMSpropOptions(0.1));
  else opt = std::make_unique<SGD>(std::vector<Tensor>{params[0]}, SGDOptions(0.1).momentum(0.9));
  opt->add_param_group({params[1]}, 0.02);
  return opt;
}

double momentum_of(const Optimizer& opt) {
  if (auto* sgd = dynamic_cast<const SGD*>(&opt)) return sgd->options.momentum_;
  if (auto* rmsprop = dynamic_cast<const RMSprop*>(&opt)) return rmsprop->options.momentum_;
  return dynamic_cast<const Adam&>(opt).options.beta1_;
}

ReduceLROnPlateauOptions plateau_options(const std::vector<double>& h) {
  // hp: max_mode, factor, patience, threshold, abs_threshold, cooldown, min_lr, eps.
  return ReduceLROnPlateauOptions()
      .mode(h[0] != 0 ? "max" : "min")
      .factor(h[1])
      .patience(int64_t(h[2]))
      .threshold(h[3])
      .threshold_mode(h[4] != 0 ? "abs" : "rel")
      .cooldown(int64_t(h[5]))
      .min_lr(h[6])
      .eps(h[7]);
}

// A closed-form scheduler or ReduceLROnPlateau behind one interface.
struct AnyScheduler {
  std::unique_ptr<LRScheduler> sched;
  std::unique_ptr<ReduceLROnPlateau> plateau;
  std::vector<double> metrics;  // plateau's metric at each step

  void step(int64_t t) {
    if (sched) sched->step();
    else plateau->step(metrics[size_t(t)]);
  }
  StateDict state_dict() const { return sched ? sched->state_dict() : plateau->state_dict(); }
  void load_state_dict(const StateDict& s) {
    if (sched) sched->load_state_dict(s);
    else plateau->load_state_dict(s);
  }
};

AnyScheduler make_fixture_scheduler(const std::string& c, Optimizer& opt) {
  const TensorMap& f = schedules();
  const std::vector<double> h = vec(at(f, c + ".hp"));
  const int64_t steps = at(f, c + ".lr").size(0) - 1;
  AnyScheduler s;
  if (c == "step_lr") s.sched = std::make_unique<StepLR>(opt, int64_t(h[0]), h[1]);
  else if (c == "multi_step_lr") s.sched = std::make_unique<MultiStepLR>(opt, at(f, c + ".milestones").to_vector<int64_t>(), h[0]);
  else if (c == "exponential_lr") s.sched = std::make_unique<ExponentialLR>(opt, h[0]);
  else if (c == "cosine_annealing_lr") s.sched = std::make_unique<CosineAnnealingLR>(opt, int64_t(h[0]), h[1]);
  else if (c == "linear_lr") s.sched = std::make_unique<LinearLR>(opt, h[0], h[1], int64_t(h[2]));
  else if (c.rfind("one_cycle", 0) == 0) s.sched = make_one_cycle(opt, h, steps);
  else {
    REQUIRE(c.rfind("plateau", 0) == 0);
    s.plateau = std::make_unique<ReduceLROnPlateau>(opt, plateau_options(h));
    s.metrics = vec(at(f, c + ".metrics"));
  }
  return s;
}

}  // namespace

TEST_CASE("learning-rate schedulers follow PyTorch's lr and momentum", "[optim]") {
  const std::vector<std::string> cases = cases_with(schedules(), ".lr");
  REQUIRE(cases.size() == 10);
  for (const std::string& c : cases) {
    INFO(c);
    std::vector<Tensor> params{zeros({3}).requires_grad_(true), zeros({2}).requires_grad_(true)};
    std::unique_ptr<Optimizer> opt = schedule_optimizer(c, params);
    AnyScheduler s = make_fixture_scheduler(c, *opt);
    const Tensor want_lr = at(schedules(), c + ".lr");  // (steps + 1, 2)
    const bool cycles = c.rfind("one_cycle", 0) == 0;
    for (int64_t t = 0; t < want_lr.size(0); ++t) {
      if (t > 0) s.step(t - 1);
      std::ostringstream what;
      what << c << " after " << t << " steps";
      require_close({opt->param_groups()[0].lr, opt->param_groups()[1].lr}, vec(want_lr[t]), 1e-12, what.str() + " lr");
      if (s.sched) CHECK(s.sched->get_last_lr() == std::vector<double>{opt->param_groups()[0].lr, opt->param_groups()[1].lr});
      if (cycles)
        require_close({momentum_of(*opt)}, {vec(at(schedules(), c + ".momentum")[t])[0]}, 1e-12, what.str() + " momentum");
    }
  }
}

TEST_CASE("OneCycleLR stops after total_steps and needs an optimizer with momentum", "[optim]") {
  Tensor p = zeros({2}).requires_grad_(true);
  SGD sgd({p}, SGDOptions(0.1).momentum(0.9));
  OneCycleLR sched(sgd, OneCycleOptions(1.0, 3));
  for (int i = 0; i < 3; ++i) sched.step();
  require_throws_with<ValueError>([&] { sched.step(); }, {"OneCycleLR", "4", "3"});

  // An optimizer with neither momentum nor betas.
  struct Plain : Optimizer {
    explicit Plain(std::vector<Tensor> params) : Optimizer(std::move(params), 0.1, "Plain") {}
    void step() override {}
  } plain({p});
  require_throws_with<ValueError>([&] { OneCycleLR(plain, OneCycleOptions(1.0, 10)); },
                                  {"OneCycleLR", "cycle_momentum", "Plain"});
  OneCycleLR no_cycle(plain, OneCycleOptions(1.0, 10).cycle_momentum(false));
  CHECK(plain.lr() == Approx(1.0 / 25));
}

// ---- gradient clipping against PyTorch -----------------------------------------------------------------

TEST_CASE("clip_grad_norm_ (2, 1, 3, inf) and clip_grad_value_ follow PyTorch", "[optim]") {
  const TensorMap& f = fixture("optim_clip_grad");
  const std::vector<std::string> cases = cases_with(f, ".hp");
  REQUIRE(cases.size() == 6);
  for (const std::string& c : cases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      const std::string tag = c + (dtype == kFloat32 ? ".f32." : ".f64.");
      std::vector<Tensor> params;
      for (size_t j = 0; j < kParams; ++j) {
        const Tensor g = at(f, "grad." + std::to_string(j)).to(dtype).clone();
        params.push_back(zeros(g.sizes(), dtype).requires_grad_(true));
        params.back().mutable_grad() = g;
      }
      params.push_back(zeros({2}, dtype).requires_grad_(true));  // no gradient: skipped
      const std::vector<double> h = vec(at(f, c + ".hp"));
      if (c == "clip_value") {
        clip_grad_value_(params, h[0]);
      } else {
        const Tensor norm = clip_grad_norm_(params, h[0], h[1]);
        REQUIRE((norm.dim() == 0 && norm.dtype() == kFloat64));
        const double total = norm.item<double>();
        require_close({total}, vec(at(f, tag + "total_norm")), pytorch_tolerance(dtype), tag + "total_norm");
      }
      for (size_t j = 0; j < kParams; ++j) {
        REQUIRE(params[j].grad().dtype() == dtype);
        require_close(vec(params[j].grad()), vec(at(f, tag + "grad." + std::to_string(j))), pytorch_tolerance(dtype),
                      tag + "grad." + std::to_string(j));
      }
      CHECK_FALSE(params.back().grad().defined());
    }
  }
  Tensor p = zeros({2}).requires_grad_(true);
  CHECK(clip_grad_norm_({p}, 1.0).item<double>() == 0.0);  // no gradients at all
}

// ---- zero_grad ---------------------------------------------------------------------------------------------

TEST_CASE("zero_grad sets gradients to none or zeroes them in place", "[optim]") {
  auto setup = [](std::vector<Tensor>& params) {
    params = {random_nonzero({2, 3}).requires_grad_(true), random_nonzero({4}).requires_grad_(true)};
    for (Tensor& p : params) p.mutable_grad() = random_nonzero(p.sizes());
  };
  std::vector<Tensor> params;
  setup(params);
  Tensor no_grad = zeros({2}).requires_grad_(true);
  SGD opt({params[0], params[1], no_grad}, SGDOptions(0.1).momentum(0.9));
  opt.step();

  SECTION("set_to_none = true (the default): no gradient, the next step skips the parameters") {
    opt.zero_grad();
    for (const Tensor& p : params) CHECK_FALSE(p.grad().defined());
    CHECK_FALSE(no_grad.grad().defined());
    const std::vector<double> before = vec(params[0]);
    opt.step();
    CHECK(vec(params[0]) == before);
  }
  SECTION("set_to_none = false: the same gradient tensors, all zero; momentum still moves") {
    const Tensor g0 = params[0].grad();
    const std::vector<double> buf = vec(opt.state_dict().at("state.0.momentum_buffer"));
    opt.zero_grad(false);
    CHECK(params[0].grad().is_same(g0));
    for (const Tensor& p : params) CHECK(vec(p.grad()) == std::vector<double>(size_t(p.numel()), 0.0));
    CHECK_FALSE(no_grad.grad().defined());
    // With a zero gradient SGD still applies the momentum: p -= lr * momentum * buf.
    const std::vector<double> before = vec(params[0]);
    opt.step();
    std::vector<double> want(before.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = before[i] - 0.1 * (0.9 * buf[i]);
    check_close(params[0], want, kFloat32, "momentum step");
  }
}

// ---- state_dict round trips --------------------------------------------------------------------------------------

namespace {

// Optimizer + scheduler state in one file's worth of bytes and back (as a checkpoint).
TensorMap through_bytes(const StateDict& opt, const StateDict& sched) {
  TensorMap all;
  for (const auto& [k, v] : opt) all["optimizer." + k] = v;
  for (const auto& [k, v] : sched) all["scheduler." + k] = v;
  return parse_safetensors(serialize_safetensors(all), "round trip").tensors;
}

StateDict take(const TensorMap& all, const std::string& prefix) {
  StateDict out;
  for (const auto& [k, v] : all)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
  return out;
}

struct Training {
  std::vector<Tensor> params;
  std::unique_ptr<Optimizer> opt;
  AnyScheduler sched;
};

}  // namespace

TEST_CASE("optimizer and scheduler state_dicts resume training bit for bit", "[optim]") {
  // An optimizer case of the trajectory fixture, with a scheduler on it.
  using MakeScheduler = std::function<AnyScheduler(Optimizer&)>;
  auto closed = [](auto make) {
    return MakeScheduler([make](Optimizer& o) { AnyScheduler s; s.sched = make(o); return s; });
  };
  const int64_t n = num_steps();
  const std::vector<std::pair<std::string, MakeScheduler>> combos{
      {"sgd_nesterov", closed([](Optimizer& o) { return std::make_unique<StepLR>(o, 4, 0.5); })},
      {"sgd_groups", closed([n](Optimizer& o) { return make_one_cycle(o, {0.5, 0.3, 25, 1e4, 0.85, 0.95, 0}, n); })},
      {"sgd_momentum_weight_decay", closed([](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.2, 1.0, 9); })},
      {"adam_amsgrad", closed([n](Optimizer& o) { return make_one_cycle(o, {0.05, 0.4, 10, 100, 0.8, 0.9, 1}, n); })},
      {"adam_missing_grads", closed([](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.9); })},
      {"adamw_custom", closed([](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 8, 1e-4); })},
      {"rmsprop_momentum", closed([](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{3, 9}, 0.5); })},
      {"rmsprop_centered", closed([n](Optimizer& o) { return make_one_cycle(o, {0.02, 0.3, 25, 1e4, 0.85, 0.95, 0}, n); })},
      {"rmsprop_all", [](Optimizer& o) {
         AnyScheduler s;
         s.plateau = std::make_unique<ReduceLROnPlateau>(o, ReduceLROnPlateauOptions().patience(1).factor(0.5).cooldown(1));
         for (int64_t t = 0; t < 20; ++t) s.metrics.push_back(1.0 - 0.1 * double(t / 5));  // plateaus of 5
         return s;
       }},
  };
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    for (const auto& [c, make_sched] : combos) {
      for (int64_t k : {1, 7}) {
        INFO(c << " " << dtype_name(dtype) << ", interrupted after " << k << " steps");
        auto start = [&, make_sched = make_sched](std::vector<Tensor> params) {
          Training r{std::move(params), nullptr, {}};
          r.opt = make_optimizer(c, r.params);
          r.sched = make_sched(*r.opt);
          return r;
        };
        auto run = [&, c = c](Training& r, int64_t from, int64_t to) {
          for (int64_t t = from; t < to; ++t) {
            feed_gradients(c, r.params, t);
            r.opt->step();
            r.sched.step(t);
          }
        };
        Training whole = start(initial_params(dtype));
        run(whole, 0, n);

        Training first = start(initial_params(dtype));
        run(first, 0, k);
        const TensorMap saved = through_bytes(first.opt->state_dict(), first.sched.state_dict());
        std::vector<Tensor> weights;  // as a model checkpoint would restore them
        for (const Tensor& p : first.params) weights.push_back(p.detach().clone().requires_grad_(true));
        run(first, k, k + 2);  // the saved state must not see later steps
        Training resumed = start(weights);
        resumed.opt->load_state_dict(take(saved, "optimizer."));
        resumed.sched.load_state_dict(take(saved, "scheduler."));
        run(resumed, k, n);

        for (size_t j = 0; j < kParams; ++j) CHECK(vec(resumed.params[j]) == vec(whole.params[j]));
        for (size_t g = 0; g < whole.opt->param_groups().size(); ++g)
          CHECK(resumed.opt->param_groups()[g].lr == whole.opt->param_groups()[g].lr);
        CHECK(momentum_of(*resumed.opt) == momentum_of(*whole.opt));
        const StateDict a = whole.opt->state_dict(), b = resumed.opt->state_dict();
        REQUIRE(a.size() == b.size());
        for (const auto& [key, t] : a) {
          INFO(key);
          REQUIRE(b.count(key) == 1);
          CHECK(b.at(key).dtype() == t.dtype());
          CHECK(vec(b.at(key)) == vec(t));
        }
      }
    }
  }
}

TEST_CASE("load_state_dict rejects a bad state dict and then leaves the optimizer as it was", "[optim]") {
  std::vector<Tensor> params = initial_params(kFloat32);
  Adam opt(params, AdamOptions(0.01));
  feed_gradients("adam", params, 0);
  opt.step();
  const StateDict good = opt.state_dict();

  std::vector<Tensor> other = initial_params(kFloat32);
  Adam fresh(other, AdamOptions(0.5));
  auto expect = [&](StateDict bad, const std::vector<std::string>& parts) {
    require_throws_with<ValueError>([&] { fresh.load_state_dict(bad); }, parts);
    CHECK(fresh.lr() == 0.5);
    CHECK(fresh.state_dict().count("state.0.exp_avg") == 0);
  };
  StateDict missing = good;
  missing.erase("param_groups.0.lr");
  expect(missing, {"Adam.load_state_dict", "param_groups.0.lr"});
  StateDict misshaped = good;
  misshaped["state.1.exp_avg"] = zeros({5});
  expect(misshaped, {"Adam.load_state_dict", "state.1.exp_avg", "(5,)", "(4,)"});
  StateDict out_of_range = good;
  out_of_range["state.3.exp_avg"] = zeros({2, 3});
  expect(out_of_range, {"Adam.load_state_dict", "state.3.exp_avg", "3"});
  StateDict bad_key = good;
  bad_key["state.x.exp_avg"] = zeros({2, 3});
  expect(bad_key, {"Adam.load_state_dict", "state.x.exp_avg"});

  fresh.load_state_dict(good);
  CHECK(fresh.lr() == 0.01);
  CHECK(vec(fresh.state_dict().at("state.0.exp_avg")) == vec(good.at("state.0.exp_avg")));

  Tensor p = zeros({2}).requires_grad_(true);
  SGD sgd({p}, 0.1);
  StepLR sched(sgd, 2);
  require_throws_with<ValueError>([&] { sched.load_state_dict({}); }, {"load_state_dict", "last_epoch"});
  ReduceLROnPlateau plateau(sgd);
  require_throws_with<ValueError>([&] { plateau.load_state_dict({}); }, {"ReduceLROnPlateau", "best"});
}

// ---- errors ----------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer hyper-parameter errors are typed and name the optimizer", "[optim]") {
  Tensor p = zeros({2, 3}).requires_grad_(true);
  const std::vector<Tensor> ps{p};
  require_throws_with<ValueError>([&] { SGD(ps, -0.1); }, {"SGD", "learning rate", "-0.1"});
  require_throws_with<ValueError>([&] { SGD(ps, SGDOptions(0.1).momentum(-0.5)); }, {"SGD", "momentum", "-0.5"});
  require_throws_with<ValueError>([&] { SGD(ps, SGDOptions(0.1).weight_decay(-1)); }, {"SGD", "weight_decay", "-1"});
  require_throws_with<ValueError>([&] { SGD(ps, SGDOptions(0.1).nesterov(true)); }, {"SGD", "nesterov", "momentum"});
  require_throws_with<ValueError>([&] { SGD(ps, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)); },
                                  {"SGD", "nesterov", "dampening"});
  require_throws_with<ValueError>([&] { Adam(ps, -1e-3); }, {"Adam", "learning rate"});
  require_throws_with<ValueError>([&] { Adam(ps, AdamOptions().betas(1.0, 0.999)); }, {"Adam", "betas", "(1, 0.999)"});
  require_throws_with<ValueError>([&] { Adam(ps, AdamOptions().betas(0.9, -0.1)); }, {"Adam", "betas", "-0.1"});
  require_throws_with<ValueError>([&] { Adam(ps, AdamOptions().eps(-1e-8)); }, {"Adam", "eps"});
  require_throws_with<ValueError>([&] { Adam(ps, AdamOptions().weight_decay(-0.1)); }, {"Adam", "weight_decay"});
  require_throws_with<ValueError>([&] { AdamW(ps, AdamOptions().betas(0.9, 1.5)); }, {"AdamW", "betas"});
  require_throws_with<ValueError>([&] { AdamW(ps, -1.0); }, {"AdamW", "learning rate"});
  require_throws_with<ValueError>([&] { RMSprop(ps, -0.01); }, {"RMSprop", "learning rate"});
  require_throws_with<ValueError>([&] { RMSprop(ps, RMSpropOptions().alpha(-0.9)); }, {"RMSprop", "alpha"});
  require_throws_with<ValueError>([&] { RMSprop(ps, RMSpropOptions().eps(-1)); }, {"RMSprop", "eps"});
  require_throws_with<ValueError>([&] { RMSprop(ps, RMSpropOptions().momentum(-0.1)); }, {"RMSprop", "momentum"});
  require_throws_with<ValueError>([&] { RMSprop(ps, RMSpropOptions().weight_decay(-0.1)); }, {"RMSprop", "weight_decay"});

  require_throws_with<ValueError>([&] { SGD({}, 0.1); }, {"SGD", "empty"});
  require_throws_with<ValueError>([&] { Adam({zeros({2})}, 0.1); }, {"Adam", "parameter 0", "requires grad"});
  Tensor non_leaf = p * 2.0;
  require_throws_with<ValueError>([&] { RMSprop({p, non_leaf}, 0.1); }, {"RMSprop", "parameter 1", "leaf"});
  SGD sgd(ps, 0.1);
  require_throws_with<ValueError>([&] { sgd.add_param_group({zeros({2}).requires_grad_(true)}, -1.0); },
                                  {"SGD", "learning rate"});
  require_throws_with<ValueError>([&] { sgd.set_lr(-1.0); }, {"SGD", "learning rate"});
}

TEST_CASE("a step with a mismatched or non-contiguous gradient names the optimizer and the shapes", "[optim]") {
  Tensor p = zeros({2, 3}).requires_grad_(true);
  Adam adam({p}, 0.1);
  p.mutable_grad() = zeros({3, 2});
  require_throws_with<ValueError>([&] { adam.step(); }, {"Adam", "(3, 2)", "(2, 3)"});
  p.mutable_grad() = zeros({2, 3}, kFloat64);
  require_throws_with<ValueError>([&] { adam.step(); }, {"Adam", "float64", "float32"});
  p.mutable_grad() = zeros({3, 2}).t();
  require_throws_with<ValueError>([&] { adam.step(); }, {"Adam", "contiguous"});
}

TEST_CASE("scheduler and clipping argument errors are typed and name the function", "[optim]") {
  Tensor p = zeros({2}).requires_grad_(true);
  SGD sgd({p}, SGDOptions(0.1).momentum(0.9));
  require_throws_with<ValueError>([&] { StepLR(sgd, 0); }, {"StepLR", "step_size", "0"});
  require_throws_with<ValueError>([&] { CosineAnnealingLR(sgd, 0); }, {"CosineAnnealingLR", "T_max"});
  require_throws_with<ValueError>([&] { LinearLR(sgd, 0.0); }, {"LinearLR", "factor"});
  require_throws_with<ValueError>([&] { LinearLR(sgd, 0.5, 1.5); }, {"LinearLR", "1.5"});
  require_throws_with<ValueError>([&] { LinearLR(sgd, 0.5, 1.0, 0); }, {"LinearLR", "total_iters"});
  require_throws_with<ValueError>([&] { OneCycleLR(sgd, OneCycleOptions(1.0, 0)); }, {"OneCycleLR", "total_steps"});
  require_throws_with<ValueError>([&] { OneCycleLR(sgd, OneCycleOptions(1.0, 10).pct_start(1.5)); },
                                  {"OneCycleLR", "pct_start", "1.5"});
  require_throws_with<ValueError>([&] { OneCycleLR(sgd, OneCycleOptions(1.0, 10).anneal_strategy("step")); },
                                  {"OneCycleLR", "anneal_strategy", "step"});
  require_throws_with<ValueError>([&] { ReduceLROnPlateau(sgd, ReduceLROnPlateauOptions().factor(1.0)); },
                                  {"ReduceLROnPlateau", "factor"});
  require_throws_with<ValueError>([&] { ReduceLROnPlateau(sgd, ReduceLROnPlateauOptions().mode("lowest")); },
                                  {"ReduceLROnPlateau", "mode", "lowest"});
  require_throws_with<ValueError>([&] { ReduceLROnPlateau(sgd, ReduceLROnPlateauOptions().threshold_mode("pct")); },
                                  {"ReduceLROnPlateau", "threshold_mode", "pct"});
  require_throws_with<ValueError>([&] { clip_grad_norm_({p}, -1.0); }, {"clip_grad_norm_", "max_norm", "-1"});
  require_throws_with<ValueError>([&] { clip_grad_norm_({p}, 1.0, 0.0); }, {"clip_grad_norm_", "norm_type"});
  require_throws_with<ValueError>([&] { clip_grad_value_({p}, -0.5); }, {"clip_grad_value_", "-0.5"});
}

TEST_CASE("a step refuses optimizer state that no longer matches its parameter's dtype", "[optim]") {
  manual_seed(23);
  nn::Linear linear(3, 2);
  Adam adam(linear->parameters(), AdamOptions(0.01));
  auto step = [&] {
    adam.zero_grad();
    linear(randn({4, 3}, linear->weight.dtype())).sum().backward();
    adam.step();
  };
  step();  // float32 state
  linear->to(kFloat64);
  require_throws_with<ValueError>(step, {"Adam", "state", "float32", "float64"});
}
