// Losses (nn/loss.h): every option combination against PyTorch's results
// (tests/golden/make_nn_golden.py, forward and input gradients to float32 tolerance), the
// forward against plain loops in double for every float dtype, the module forms, float64
// gradcheck of each loss and option, and the error paths.
#include <cmath>

#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

const std::vector<std::string> kReductions{"none", "mean", "sum"};

Tensor fixture(const std::string& name) {
  const SafetensorsFile& file = golden_file("nn_losses");
  auto it = file.tensors.find(name);
  INFO("fixture " << name);
  REQUIRE(it != file.tensors.end());
  return it->second;
}

// A copy of a fixture as a leaf requiring grad: contiguous, or stored transposed (the
// loss then sees a non-contiguous view with the same values).
struct Input {
  Input(const Tensor& x, bool transposed)
      : transposed(transposed),
        leaf((transposed ? x.transpose(0, 1).contiguous() : x.clone()).requires_grad_(true)),
        view(transposed ? leaf.transpose(0, 1) : leaf) {}
  Tensor grad() const { return transposed ? leaf.grad().transpose(0, 1) : leaf.grad(); }
  bool transposed;
  Tensor leaf, view;
};

// Runs loss(input) and backpropagates gy (for "none") or 1; returns the loss.
Tensor run_backward(const Tensor& out, const Tensor& gy, const std::string& reduction) {
  if (reduction == "none") out.backward(gy);
  else out.backward();
  return out;
}

// ---- the class-index losses -----------------------------------------------------------------
// PyTorch's cross_entropy (nll_loss: log_input) over (N, C, D) scores in double, per (n, d):
// (1 - eps) · -w[y] log p[y] + eps/C · Σ_c -w_c log p_c, 0 where y = ignore_index; "mean"
// divides by Σ w[y] over the kept rows.
std::vector<double> ref_class_loss(const Tensor& input, const Tensor& target, const std::vector<double>& w,
                                   int64_t ignore, double eps, const std::string& reduction, bool log_input) {
  const int64_t N = input.size(0), C = input.size(1), D = input.numel() / (N * C);
  const std::vector<double> x = values(input);
  const std::vector<int64_t> t = target.to_vector<int64_t>();
  std::vector<double> rows;
  double total = 0, weight_sum = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      const int64_t y = t[size_t(n * D + d)];
      if (y == ignore) {
        rows.push_back(0);
        continue;
      }
      std::vector<double> logp(static_cast<size_t>(C));
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, x[size_t((n * C + c) * D + d)]);
      for (int64_t c = 0; c < C; ++c) s += std::exp(x[size_t((n * C + c) * D + d)] - m);
      for (int64_t c = 0; c < C; ++c) {
        const double v = x[size_t((n * C + c) * D + d)];
        logp[size_t(c)] = log_input ? v : v - m - std::log(s);
      }
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth -= w[size_t(c)] * logp[size_t(c)];
      const double row = (1 - eps) * -w[size_t(y)] * logp[size_t(y)] + eps / double(C) * smooth;
      rows.push_back(row);
      total += row;
      weight_sum += w[size_t(y)];
    }
  }
  if (reduction == "none") return rows;
  return {reduction == "sum" ? total : total / weight_sum};
}

// The option combinations of the fixtures: class weights, which targets are ignored,
// label smoothing and the reduction.
struct ClassCase {
  bool weighted;
  std::string ignore;  // keep, m100 (default ignore_index, some targets -100), idx1 (ignore_index 1)
  double smoothing;
  std::string reduction;

  nn::CrossEntropyLossOptions options(const Tensor& class_weight) const {
    nn::CrossEntropyLossOptions o;
    if (weighted) o.weight(class_weight);
    if (ignore == "idx1") o.ignore_index(1);
    return o.label_smoothing(smoothing).reduction(reduction);
  }
  std::string name(const std::string& base, bool cross_entropy) const {
    return base + (weighted ? "_w1_" : "_w0_") + ignore + (cross_entropy ? (smoothing > 0 ? "_ls1_" : "_ls0_") : "_") +
           reduction;
  }
};

std::vector<ClassCase> class_cases(bool cross_entropy) {
  std::vector<ClassCase> out;
  for (bool weighted : {false, true})
    for (const char* ignore : {"keep", "m100", "idx1"})
      for (double smoothing : cross_entropy ? std::vector<double>{0.0, 0.1} : std::vector<double>{0.0})
        for (const std::string& r : kReductions) out.push_back({weighted, ignore, smoothing, r});
  return out;
}

}  // namespace

TEST_CASE("cross_entropy and nll_loss match PyTorch for every option combination", "[nn]") {
  const Tensor class_weight = fixture("class_weight");
  for (bool ce : {true, false}) {
    for (const char* shape : {"nc", "ncd"}) {
      const std::string base = std::string(ce ? "cross_entropy_" : "nll_loss_") + shape;
      const Tensor input = fixture(base + ".input"), gy = fixture(base + ".gy");
      for (const ClassCase& c : class_cases(ce)) {
        const std::string name = c.name(base, ce);
        INFO(name);
        const Tensor target = fixture(base + ".target_" + c.ignore);
        const nn::CrossEntropyLossOptions o = c.options(class_weight);
        for (bool transposed : {false, true}) {
          INFO((transposed ? "transposed input" : "contiguous input"));
          const Input x(input, transposed);
          Tensor out = ce ? nn::CrossEntropyLoss(o)(x.view, target) : nn::NLLLoss(o)(x.view, target);
          run_backward(out, gy, c.reduction);
          check_close(out, fixture(name + ".out"), "out");
          check_close(x.grad(), fixture(name + ".grad_input"), "grad");
        }
        // int32 targets and the functional form give the same loss.
        Tensor again = ce ? F::cross_entropy(input, target.to(kInt32), o) : F::nll_loss(input, target.to(kInt32), o);
        check_close(again, fixture(name + ".out"), "int32 target");
      }
    }
  }
}

TEST_CASE("cross_entropy and nll_loss match a plain loop for every float dtype", "[nn]") {
  const std::vector<double> w{0.5, 2.0, 1.0, 0.25};
  const Tensor w_t = from_vector(w, {4});
  for (DType dt : float_dtypes()) {
    for (bool ce : {true, false}) {
      for (Shape shape : {Shape{5, 4}, Shape{3, 4, 2}}) {
        Shape tshape = shape;
        tshape.erase(tshape.begin() + 1);
        Tensor target = randint(0, 4, tshape);
        target.view({-1}).select(0, 0).fill_(1);  // a target that idx1 ignores
        const Tensor x = ce ? random_nonzero(shape, dt, -3, 3) : random_nonzero(shape, kFloat64).log_softmax(1).to(dt);
        for (const ClassCase& c : class_cases(ce)) {
          if (c.ignore == "m100") continue;  // the same as idx1 with another value
          INFO(dtype_name(dt) << " " << c.name(shape.size() == 2 ? "nc" : "ncd", ce));
          const nn::CrossEntropyLossOptions o = c.options(w_t.to(dt));
          Tensor out = ce ? F::cross_entropy(x, target, o) : F::nll_loss(x, target, o);
          CHECK(out.dtype() == dt);
          CHECK(out.sizes() == (c.reduction == "none" ? tshape : Shape{}));
          check_close(out, ref_class_loss(x, target, c.weighted ? w : std::vector<double>(4, 1.0),
                                          c.ignore == "idx1" ? 1 : -100, c.smoothing, c.reduction, !ce),
                      dt);
        }
      }
    }
  }
}

TEST_CASE("cross_entropy and nll_loss pass gradcheck for every option combination", "[nn]") {
  const Tensor w = from_vector(std::vector<double>{0.5, 2.0, 1.0, 0.25}, {4});
  // (N, C) as a transposed view, and (N, C, d).
  const Tensor x2 = leaf({4, 3}), x3 = leaf({2, 4, 2});
  const Tensor t2 = tensor<int64_t>({1, 0, 3}), t3 = tensor<int64_t>({1, 2, 3, 1}, {2, 2});
  for (bool ce : {true, false}) {
    for (const ClassCase& c : class_cases(ce)) {
      if (c.ignore == "m100") continue;
      INFO(c.name(ce ? "cross_entropy" : "nll_loss", ce));
      const nn::CrossEntropyLossOptions o = c.options(w);
      auto loss = [&](const Tensor& x, const Tensor& t) {
        return ce ? F::cross_entropy(x, t, o) : F::nll_loss(x, t, o);
      };
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return loss(in[0].t(), t2); }, {x2}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return loss(in[0], t3); }, {x3}));
    }
  }
}

TEST_CASE("cross_entropy: -inf logits of other classes give a finite loss and gradient", "[nn]") {
  // Masked logits (as in a masked vocabulary): PyTorch picks log p[y] and never forms 0 · -inf.
  Tensor x = tensor<float>({1.f, -INFINITY, 0.5f, -INFINITY, 2.f, 0.f}, {2, 3}).requires_grad_(true);
  Tensor t = tensor<int64_t>({0, 1});
  Tensor loss = F::cross_entropy(x, t);
  const double p0 = std::exp(1.0) / (std::exp(1.0) + std::exp(0.5)), p1 = std::exp(2.0) / (std::exp(2.0) + 1);
  check_close(loss, {-(std::log(p0) + std::log(p1)) / 2}, kFloat32);
  loss.backward();
  check_close(x.grad(), {(p0 - 1) / 2, 0, (1 - p0) / 2, 0, (p1 - 1) / 2, (1 - p1) / 2}, kFloat32);
  check_close(F::nll_loss(x.detach(), tensor<int64_t>({2, 1})), {-(0.5 + 2.0) / 2}, kFloat32);
}

// ---- the regression losses ------------------------------------------------------------------
namespace {

// Per-element losses in double, from input and target values.
std::vector<double> ref_elementwise(const std::vector<double>& x, const std::vector<double>& y,
                                    const std::function<double(double, double, size_t)>& f,
                                    const std::string& reduction) {
  std::vector<double> out;
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    out.push_back(f(x[i], y[i], i));
    total += out.back();
  }
  if (reduction == "none") return out;
  return {reduction == "sum" ? total : total / double(x.size())};
}

double smooth_l1(double x, double y, double beta) {
  const double d = std::abs(x - y);
  return d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
}

// BCE with logits in double: -w (pw y log σ(x) + (1 - y) log(1 - σ(x))); weight (4, 1) and
// pos_weight (3) broadcast over the (4, 3) input.
double bce(double x, double y, double pw, double w) {
  const double log_sig = -std::log1p(std::exp(-x)), log_one_minus = -x + log_sig;
  return -w * (pw * y * log_sig + (1 - y) * log_one_minus);
}

const std::vector<std::pair<std::string, double>> kBetas{{"b1", 1.0}, {"b05", 0.5}, {"b0", 0.0}};

}  // namespace

TEST_CASE("mse, l1, smooth_l1 and bce_with_logits losses match PyTorch", "[nn]") {
  const Tensor x = fixture("regression.input"), y = fixture("regression.target"), gy = fixture("regression.gy");
  using LossFn = std::function<Tensor(const Tensor&, const Tensor&, const std::string&)>;
  std::vector<std::pair<std::string, LossFn>> losses{
      {"mse_loss", [](const Tensor& a, const Tensor& b, const std::string& r) { return nn::MSELoss(r)(a, b); }},
      {"l1_loss", [](const Tensor& a, const Tensor& b, const std::string& r) { return nn::L1Loss(r)(a, b); }}};
  for (auto& [name, beta] : kBetas)
    losses.push_back({"smooth_l1_loss_" + name, [beta = beta](const Tensor& a, const Tensor& b, const std::string& r) {
                        return nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(beta).reduction(r))(a, b);
                      }});
  const Tensor bx = fixture("bce.input"), by = fixture("bce.target");
  for (bool pw : {false, true})
    for (bool w : {false, true}) {
      nn::BCEWithLogitsLossOptions o;
      if (pw) o.pos_weight(fixture("bce.pos_weight"));
      if (w) o.weight(fixture("bce.weight"));
      losses.push_back({std::string("bce_with_logits_") + (pw ? "pw1" : "pw0") + (w ? "_w1" : "_w0"),
                        [o](const Tensor& a, const Tensor& b, const std::string& r) {
                          return nn::BCEWithLogitsLoss(nn::BCEWithLogitsLossOptions(o).reduction(r))(a, b);
                        }});
    }
  for (auto& [name, loss] : losses) {
    const bool is_bce = name.rfind("bce", 0) == 0;
    for (const std::string& r : kReductions) {
      for (bool transposed : {false, true}) {
        INFO(name << "_" << r << (transposed ? " transposed" : ""));
        const Input in(is_bce ? bx : x, transposed), target(is_bce ? by : y, transposed);
        Tensor out = run_backward(loss(in.view, target.view, r), gy, r);
        const std::string key = name + "_" + r;
        check_close(out, fixture(key + ".out"), "out");
        check_close(in.grad(), fixture(key + ".grad_input"), "grad input");
        check_close(target.grad(), fixture(key + ".grad_target"), "grad target");
      }
    }
  }
}

TEST_CASE("mse, l1, smooth_l1 and bce_with_logits losses match a plain loop for every float dtype", "[nn]") {
  // Seeded: its values must not depend on the tests that ran before it in one process
  // (bfloat16 BCE, a composite of 16-bit ops as PyTorch's, sits near the dtype's tolerance).
  manual_seed(17);
  for (DType dt : float_dtypes()) {
    // The target a transposed view; y within [0, 1] for BCE.
    const Tensor x = random_nonzero({4, 3}, dt), y = random_nonzero({3, 4}, dt).t();
    const Tensor p = rand({3, 4}, dt).t(), pw = random_nonzero({3}, dt, 0.5, 3), w = random_nonzero({4, 1}, dt, 0.2, 2);
    const std::vector<double> xv = values(x), yv = values(y), pv = values(p), pwv = values(pw), wv = values(w);
    for (const std::string& r : kReductions) {
      INFO(dtype_name(dt) << " " << r);
      check_close(F::mse_loss(x, y, r), ref_elementwise(xv, yv, [](double a, double b, size_t) { return (a - b) * (a - b); }, r), dt, "mse");
      check_close(F::l1_loss(x, y, r), ref_elementwise(xv, yv, [](double a, double b, size_t) { return std::abs(a - b); }, r), dt, "l1");
      for (auto& [name, beta] : kBetas) {
        Tensor out = F::smooth_l1_loss(x, y, nn::SmoothL1LossOptions().beta(beta).reduction(r));
        auto ref = [beta = beta](double a, double b, size_t) { return beta == 0 ? std::abs(a - b) : smooth_l1(a, b, beta); };
        check_close(out, ref_elementwise(xv, yv, ref, r), dt, "smooth_l1 " + name);
      }
      for (bool use_pw : {false, true})
        for (bool use_w : {false, true}) {
          nn::BCEWithLogitsLossOptions o;
          o.reduction(r);
          if (use_pw) o.pos_weight(pw);
          if (use_w) o.weight(w);
          auto ref = [&](double a, double b, size_t i) {
            return bce(a, b, use_pw ? pwv[i % 3] : 1.0, use_w ? wv[i / 3] : 1.0);
          };
          check_close(F::binary_cross_entropy_with_logits(x, p, o), ref_elementwise(xv, pv, ref, r), dt, "bce");
        }
    }
  }
}

TEST_CASE("bce_with_logits is stable for large logits", "[nn]") {
  Tensor x = tensor<double>({100.0, -100.0, 40.0, -40.0});
  Tensor y = tensor<double>({0.0, 1.0, 1.0, 0.0});
  check_close(F::binary_cross_entropy_with_logits(x, y, nn::BCEWithLogitsLossOptions().reduction("none")),
              {100.0, 100.0, std::log1p(std::exp(-40.0)), std::log1p(std::exp(-40.0))}, kFloat64);
}

TEST_CASE("mse, l1, smooth_l1 and bce_with_logits losses pass gradcheck", "[nn]") {
  // Targets at least 0.1 away from the inputs (no L1 kink at 0); the target a transposed view.
  const Tensor x = leaf({3, 4});
  const Tensor y = (x.detach() + random_nonzero({4, 3}, kFloat64).t()).requires_grad_(true);
  const Tensor yt = y.detach().t().contiguous().requires_grad_(true);
  const Tensor p = rand({3, 4}, kFloat64).requires_grad_(true);
  const Tensor pw = random_nonzero({4}, kFloat64, 0.5, 3).requires_grad_(true);
  const Tensor w = random_nonzero({3, 1}, kFloat64, 0.2, 2).requires_grad_(true);
  for (const std::string& r : kReductions) {
    INFO(r);
    auto check2 = [&](const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {x, y}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1].t()); }, {x, yt}));
    };
    check2([&](const Tensor& a, const Tensor& b) { return F::mse_loss(a, b, r); });
    check2([&](const Tensor& a, const Tensor& b) { return F::l1_loss(a, b, r); });
    for (auto& [name, beta] : kBetas) {
      INFO(name);
      check2([&](const Tensor& a, const Tensor& b) {
        return F::smooth_l1_loss(a, b, nn::SmoothL1LossOptions().beta(beta).reduction(r));
      });
    }
    for (bool use_pw : {false, true})
      for (bool use_w : {false, true}) {
        INFO("bce pos_weight " << use_pw << " weight " << use_w);
        CHECK(gradcheck(
            [&](const std::vector<Tensor>& in) {
              nn::BCEWithLogitsLossOptions o;
              o.reduction(r);
              if (use_pw) o.pos_weight(in[2]);
              if (use_w) o.weight(in[3]);
              return F::binary_cross_entropy_with_logits(in[0], in[1], o);
            },
            {x, p, pw, w}));
      }
  }
}

TEST_CASE("losses reject bad reductions, shapes, class indices and target dtypes", "[nn]") {
  const Tensor x = randn({6, 5}), t = randint(0, 5, {6}), y = randn({6, 5});
  const auto bad = nn::CrossEntropyLossOptions().reduction("avg");
  require_throws_with<ValueError>([&] { F::cross_entropy(x, t, bad); }, {"cross_entropy", "'avg'"});
  require_throws_with<ValueError>([&] { F::nll_loss(x, t, bad); }, {"nll_loss", "'avg'"});
  require_throws_with<ValueError>([&] { F::mse_loss(x, y, "avg"); }, {"mse_loss", "'avg'"});
  require_throws_with<ValueError>([&] { nn::L1Loss("Mean")(x, y); }, {"l1_loss", "'Mean'"});
  require_throws_with<ValueError>([&] { F::smooth_l1_loss(x, y, nn::SmoothL1LossOptions().reduction("")); },
                                  {"smooth_l1_loss", "''"});
  require_throws_with<ValueError>(
      [&] { F::binary_cross_entropy_with_logits(x, y, nn::BCEWithLogitsLossOptions().reduction("max")); },
      {"binary_cross_entropy_with_logits", "'max'"});

  // Target shapes.
  require_throws_with<ShapeError>([&] { F::cross_entropy(x, randint(0, 5, {5})); },
                                  {"cross_entropy", "(5,)", "(6, 5)", "expected (6,)"});
  require_throws_with<ShapeError>([&] { F::cross_entropy(randn({2, 5, 3}), randint(0, 5, {2, 5})); },
                                  {"cross_entropy", "(2, 5)", "(2, 5, 3)", "expected (2, 3)"});
  require_throws_with<ShapeError>([&] { F::nll_loss(randn({5}), randint(0, 5, {1})); }, {"nll_loss", "(5,)"});
  require_throws_with<ShapeError>([&] { F::mse_loss(x, randn({5, 6})); }, {"mse_loss", "(6, 5)", "(5, 6)"});
  require_throws_with<ShapeError>([&] { F::l1_loss(x, randn({6})); }, {"l1_loss", "(6, 5)", "(6,)"});
  require_throws_with<ShapeError>([&] { F::smooth_l1_loss(x, randn({1, 5})); }, {"smooth_l1_loss", "(1, 5)"});
  require_throws_with<ShapeError>([&] { F::binary_cross_entropy_with_logits(x, rand({6, 1})); },
                                  {"binary_cross_entropy_with_logits", "(6, 5)", "(6, 1)"});
  require_throws_with<ShapeError>(
      [&] { F::cross_entropy(x, t, nn::CrossEntropyLossOptions().weight(ones({4}))); },
      {"cross_entropy", "weight", "(4,)", "5 classes"});

  // Class indices out of range (ignore_index is exempt).
  Tensor too_big = t.clone();
  too_big.select(0, 2).fill_(5);
  require_throws_with<IndexError>([&] { F::cross_entropy(x, too_big); }, {"cross_entropy", "class 5", "(6, 5)"});
  Tensor negative = t.clone();
  negative.select(0, 0).fill_(-1);
  require_throws_with<IndexError>([&] { F::nll_loss(x, negative); }, {"nll_loss", "class -1", "(6, 5)"});
  CHECK_NOTHROW(F::cross_entropy(x, negative, nn::CrossEntropyLossOptions().ignore_index(-1)));

  // Target dtypes.
  require_throws_with<DTypeError>([&] { F::cross_entropy(x, t.to(kFloat32)); }, {"cross_entropy", "float32"});
  require_throws_with<DTypeError>([&] { F::nll_loss(x, t.to(kBool)); }, {"nll_loss", "bool"});
  require_throws_with<DTypeError>([&] { F::cross_entropy(randint(0, 3, {6, 5}), t); }, {"cross_entropy", "int64"});
  require_throws_with<DTypeError>([&] { F::binary_cross_entropy_with_logits(x, randint(0, 2, {6, 5})); },
                                  {"binary_cross_entropy_with_logits", "(6, 5)", "int64"});

  // Other options.
  require_throws_with<ValueError>([&] { F::cross_entropy(x, t, nn::CrossEntropyLossOptions().label_smoothing(1.5)); },
                                  {"cross_entropy", "label_smoothing", "1.5"});
  require_throws_with<ValueError>([&] { F::nll_loss(x, t, nn::NLLLossOptions().label_smoothing(0.1)); },
                                  {"nll_loss", "label_smoothing"});
  require_throws_with<ValueError>([&] { F::smooth_l1_loss(x, y, nn::SmoothL1LossOptions().beta(-1)); },
                                  {"smooth_l1_loss", "beta", "-1"});
}

TEST_CASE("loss modules keep class weights as buffers that follow ->to()", "[nn]") {
  const Tensor w = rand({4}) + 0.5, pw = rand({3}) + 0.5;
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(w));
  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().weight(w.narrow(0, 0, 3)).pos_weight(pw));
  nn::NLLLoss plain;
  auto names = [](const nn::StateDict& sd) {
    std::vector<std::string> out;
    for (const auto& [k, t] : sd) out.push_back(k);
    return out;
  };
  // PyTorch's state_dict keys for these modules.
  CHECK(names(ce->state_dict()) == std::vector<std::string>{"weight"});
  CHECK(names(bce->state_dict()) == std::vector<std::string>{"weight", "pos_weight"});
  CHECK(plain->state_dict().size() == 0);
  CHECK(ce->state_dict().at("weight").to_vector<float>() == w.to_vector<float>());
  ce->to(kFloat64);
  bce->to(kFloat64);
  CHECK(ce->options.weight_.dtype() == kFloat64);  // the options use the moved buffer
  CHECK(w.dtype() == kFloat32);                     // the caller's tensor stays where it was
  CHECK(bce->options.pos_weight_.dtype() == kFloat64);
  // The float64 weights give the float32 loss's value.
  const Tensor x = test::random_nonzero({5, 4}, kFloat64);
  const Tensor y = from_vector<int64_t>({0, 3, 1, 2, 3}, {5});
  const double got = ce(x, y).item<double>();
  const double want = nn::functional::cross_entropy(x.to(kFloat32), y, nn::CrossEntropyLossOptions().weight(w))
                          .item<double>();
  CHECK(got == Approx(want).epsilon(1e-6));
}
