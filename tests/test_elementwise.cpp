// Elementwise unary and binary ops: forward against plain loops in double (all float
// dtypes, ints where meaningful; contiguous, transposed, sliced and broadcast inputs),
// scalar and in-place forms, operators, type promotion, where/masked_fill/clamp,
// gradchecks, and the error paths.
#include <cmath>
#include <map>
#include <variant>

#include "autograd/node.h"
#include "elementwise_cases.h"
#include "kernels/math/functors.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
using kernels::BinaryOp;
using kernels::ReduceOp;
using kernels::UnaryOp;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Values of t broadcast to `shape`, by index arithmetic (independent of loom's expand).
std::vector<double> broadcast_ref(const Tensor& t, const Shape& shape) {
  const std::vector<double> v = t.to_vector<double>();
  const Shape& ts = t.sizes();
  const int64_t lead = int64_t(shape.size()) - int64_t(ts.size());
  std::vector<double> out(size_t(numel_of(shape)));
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    int64_t rem = i, src = 0, src_stride = 1;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      const int64_t coord = rem % shape[size_t(d)];
      rem /= shape[size_t(d)];
      const int64_t td = d - lead;
      if (td < 0) continue;
      if (ts[size_t(td)] != 1) src += coord * src_stride;
      src_stride *= ts[size_t(td)];
    }
    out[size_t(i)] = v[size_t(src)];
  }
  return out;
}

// Three layouts of the same logical (rows, cols) input: contiguous, transposed, sliced
// with a step.
std::vector<std::pair<const char*, Tensor>> layouts(int64_t rows, int64_t cols, DType dt, double low,
                                                    double high) {
  return {{"contiguous", random_nonzero({rows, cols}, dt, low, high)},
          {"transposed", random_nonzero({cols, rows}, dt, low, high).t()},
          {"sliced", random_nonzero({rows, 2 * cols + 1}, dt, low, high).slice(1, 1, 2 * cols + 1, 2)}};
}

Tensor leaf_like_layout(const Tensor& t) { return t.to(kFloat64).detach().requires_grad_(true); }

// The kernel op a Tensor-level case runs: x + 2 and 3 - x are binary ops with a 0-dim b.
using KernelOp = std::variant<UnaryOp, BinaryOp>;

const char* backward_name(const KernelOp& op) {
  return std::visit([](auto o) { return kernels::op_info(o).backward_name; }, op);
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  double low, high;  // input range
  bool ints;         // also defined on integer tensors (same dtype out)
  KernelOp op;       // differentiable if its row (kernels/math/elementwise_ops.h) names a backward node
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return x.neg(); }, [](double x) { return -x; }, -2, 2, true, UnaryOp::Neg},
      {"operator-", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -2, 2, true, UnaryOp::Neg},
      {"abs", [](const Tensor& x) { return x.abs(); }, [](double x) { return std::abs(x); }, -2, 2, true, UnaryOp::Abs},
      {"exp", [](const Tensor& x) { return x.exp(); }, [](double x) { return std::exp(x); },
       -2, 2, false, UnaryOp::Exp},
      {"log", [](const Tensor& x) { return x.log(); }, [](double x) { return std::log(x); },
       0.1, 3, false, UnaryOp::Log},
      {"log1p", [](const Tensor& x) { return x.log1p(); }, [](double x) { return std::log1p(x); },
       -0.5, 2, false, UnaryOp::Log1p},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, [](double x) { return std::sqrt(x); },
       0.1, 3, false, UnaryOp::Sqrt},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, [](double x) { return 1 / std::sqrt(x); },
       0.1, 3, false, UnaryOp::Rsqrt},
      {"sin", [](const Tensor& x) { return x.sin(); }, [](double x) { return std::sin(x); },
       -3, 3, false, UnaryOp::Sin},
      {"cos", [](const Tensor& x) { return x.cos(); }, [](double x) { return std::cos(x); },
       -3, 3, false, UnaryOp::Cos},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, [](double x) { return std::tanh(x); },
       -3, 3, false, UnaryOp::Tanh},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, sigmoid_ref, -4, 4, false, UnaryOp::Sigmoid},
      {"relu", [](const Tensor& x) { return x.relu(); }, [](double x) { return x > 0 ? x : 0; },
       -2, 2, true, UnaryOp::Relu},
      {"gelu", [](const Tensor& x) { return x.gelu(); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -3, 3, false, UnaryOp::Gelu},
      {"gelu tanh", [](const Tensor& x) { return x.gelu(true); },
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); },
       -3, 3, false, UnaryOp::GeluTanh},
      {"silu", [](const Tensor& x) { return x.silu(); }, [](double x) { return x * sigmoid_ref(x); },
       -3, 3, false, UnaryOp::Silu},
      {"square", [](const Tensor& x) { return x.square(); }, [](double x) { return x * x; },
       -2, 2, true, BinaryOp::Mul},
      {"sign", [](const Tensor& x) { return x.sign(); }, [](double x) { return double((x > 0) - (x < 0)); },
       -2, 2, true, UnaryOp::Sign},
      {"clamp", [](const Tensor& x) { return x.clamp(-1, 2); }, [](double x) { return std::min(std::max(x, -1.0), 2.0); },
       -3, 3, true, UnaryOp::Clamp},
      {"clamp float bounds", [](const Tensor& x) { return x.clamp(-1.5, 1.5); },
       [](double x) { return std::min(std::max(x, -1.5), 1.5); }, -3, 3, false, UnaryOp::Clamp},
      {"clamp min", [](const Tensor& x) { return x.clamp(0.5, std::nullopt); }, [](double x) { return std::max(x, 0.5); },
       -2, 2, false, UnaryOp::Clamp},
      {"clamp max", [](const Tensor& x) { return x.clamp(std::nullopt, -1); }, [](double x) { return std::min(x, -1.0); },
       -3, 3, true, UnaryOp::Clamp},
      {"pow 2", [](const Tensor& x) { return x.pow(2); }, [](double x) { return x * x; },
       -2, 2, true, UnaryOp::PowScalar},
      {"nan_to_num", [](const Tensor& x) { return x.nan_to_num(0.5, 7, -7); }, [](double x) { return x; },
       -2, 2, true, UnaryOp::NanToNum},
      {"pow 3", [](const Tensor& x) { return x.pow(3); }, [](double x) { return x * x * x; },
       -2, 2, true, UnaryOp::PowScalar},
      {"pow 0", [](const Tensor& x) { return x.pow(0); }, [](double) { return 1.0; }, -2, 2, true, UnaryOp::PowScalar},
      {"pow 0.5", [](const Tensor& x) { return x.pow(0.5); }, [](double x) { return std::sqrt(x); },
       0.1, 3, false, UnaryOp::PowScalar},
      {"pow -1.5", [](const Tensor& x) { return x.pow(-1.5); }, [](double x) { return std::pow(x, -1.5); },
       0.2, 3, false, UnaryOp::PowScalar},
      {"add scalar", [](const Tensor& x) { return x + 2; }, [](double x) { return x + 2; }, -2, 2, true, BinaryOp::Add},
      {"scalar sub", [](const Tensor& x) { return 3 - x; }, [](double x) { return 3 - x; }, -2, 2, true, BinaryOp::Sub},
      {"mul scalar", [](const Tensor& x) { return x * -3; }, [](double x) { return -3 * x; },
       -2, 2, true, BinaryOp::Mul},
      {"scalar mul", [](const Tensor& x) { return 2 * x; }, [](double x) { return 2 * x; }, -2, 2, true, BinaryOp::Mul},
      {"sub scalar", [](const Tensor& x) { return x - 1.5; }, [](double x) { return x - 1.5; },
       -2, 2, false, BinaryOp::Sub},
      {"div scalar", [](const Tensor& x) { return x / 4.0; }, [](double x) { return x / 4; },
       -2, 2, false, BinaryOp::Div},
      {"scalar div", [](const Tensor& x) { return 1.5 / x; }, [](double x) { return 1.5 / x; },
       -2, 2, false, BinaryOp::Div},
      {"scalar add", [](const Tensor& x) { return 0.5 + x; }, [](double x) { return 0.5 + x; },
       -2, 2, false, BinaryOp::Add},
  };
  return cases;
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<double(double, double)> ref;
  double a_low, a_high, b_low, b_high;
  bool ints;  // also on integer tensors (the reference is then exact)
  BinaryOp op;
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return a.add(b); }, [](double a, double b) { return a + b; },
       -2, 2, -2, 2, true, BinaryOp::Add},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return a.add(b, 3); }, [](double a, double b) { return a + 3 * b; },
       -2, 2, -2, 2, true, BinaryOp::Add},
      {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; },
       -2, 2, -2, 2, true, BinaryOp::Add},
      {"sub", [](const Tensor& a, const Tensor& b) { return a.sub(b); }, [](double a, double b) { return a - b; },
       -2, 2, -2, 2, true, BinaryOp::Sub},
      {"sub alpha", [](const Tensor& a, const Tensor& b) { return a.sub(b, -2); }, [](double a, double b) { return a + 2 * b; },
       -2, 2, -2, 2, true, BinaryOp::Sub},
      {"operator-", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; },
       -2, 2, -2, 2, true, BinaryOp::Sub},
      {"mul", [](const Tensor& a, const Tensor& b) { return a.mul(b); }, [](double a, double b) { return a * b; },
       -2, 2, -2, 2, true, BinaryOp::Mul},
      {"operator*", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; },
       -2, 2, -2, 2, true, BinaryOp::Mul},
      {"div", [](const Tensor& a, const Tensor& b) { return a.div(b); }, [](double a, double b) { return a / b; },
       -2, 2, -2, 2, false, BinaryOp::Div},
      {"operator/", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; },
       -2, 2, -2, 2, false, BinaryOp::Div},
      {"pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); }, [](double a, double b) { return std::pow(a, b); },
       0.2, 2, -2, 2, false, BinaryOp::Pow},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); },
       -2, 2, -2, 2, true, BinaryOp::Maximum},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, [](double a, double b) { return std::min(a, b); },
       -2, 2, -2, 2, true, BinaryOp::Minimum},
  };
  return cases;
}

struct BroadcastCase {
  const char* name;
  Shape a, b;
};

const std::vector<BroadcastCase>& broadcast_cases() {
  static const std::vector<BroadcastCase> cases = {
      {"same shape", {3, 4}, {3, 4}},
      {"column with row", {3, 1}, {1, 4}},
      {"trailing vector", {2, 3, 4}, {4}},
      {"vector broadcast up", {4}, {2, 3, 4}},
      {"middle dim", {2, 1, 4}, {3, 1}},
      {"0-dim", {}, {3, 4}},
      {"to 0-dim", {2, 3}, {}},
  };
  return cases;
}

}  // namespace

// ---- unary ---------------------------------------------------------------------------------

TEST_CASE("unary ops match a plain loop in every float dtype and layout", "[core]") {
  manual_seed(1);
  for (const UnaryCase& c : unary_cases()) {
    for (DType dt : float_dtypes()) {
      for (auto& [layout, x] : layouts(5, 7, dt, c.low, c.high)) {
        INFO(c.name << ", " << dtype_name(dt) << ", " << layout);
        Tensor y = c.fn(x);
        CHECK(y.dtype() == dt);
        CHECK(y.sizes() == x.sizes());
        std::vector<double> ref;
        for (double v : values(x)) ref.push_back(c.ref(v));
        check_close(y, ref, dt, c.name);
      }
    }
  }
}

TEST_CASE("unary ops on integer tensors", "[core]") {
  manual_seed(2);
  for (const UnaryCase& c : unary_cases()) {
    for (DType dt : {kInt64, kInt32}) {
      Tensor x = random_nonzero({4, 5}, dt, -3, 3);
      INFO(c.name << ", " << dtype_name(dt));
      Tensor y = c.fn(x);
      std::vector<double> ref;
      for (double v : values(x)) ref.push_back(c.ref(v));
      if (c.ints) {
        CHECK(y.dtype() == dt);
        check_close(y, ref, dt, c.name);
      } else if (std::string(c.name).find("scalar") == std::string::npos &&
                 std::string(c.name).find("clamp") == std::string::npos) {
        // Float-only math on integers computes in float32, as PyTorch.
        CHECK(y.dtype() == kFloat32);
        check_close(y, ref, kFloat32, c.name);
      }
    }
  }
  // Non-contiguous integer input.
  Tensor x = tensor<int64_t>({-3, 4, 0, 2, -1, 5}, {2, 3}).t();
  CHECK(x.abs().to_vector<int64_t>() == std::vector<int64_t>{3, 2, 4, 1, 0, 5});
  CHECK(x.clamp(-1, 3).to_vector<int64_t>() == std::vector<int64_t>{-1, 2, 3, -1, 0, 3});
  CHECK(x.sign().to_vector<int64_t>() == std::vector<int64_t>{-1, 1, 1, -1, 0, 1});
  // Float bounds make an integer clamp float32, as PyTorch; clamp_ then cannot store it.
  CHECK(x.clamp(-1.5, 3).dtype() == kFloat32);
  require_throws_with<DTypeError>([&] { x.clone().clamp_(0.5, 1); }, {"clamp_", "float32", "int64"});
  Tensor xc = x.contiguous();
  xc.clamp_(0, 2);
  CHECK(xc.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 2, 0, 0, 2});
  // Integer clamp with bounds beyond int32's range saturates instead of wrapping.
  CHECK(tensor({5, -5}).clamp(-1e12, 1e12).to_vector<int32_t>() == std::vector<int32_t>{5, -5});
  // int tensor ** float exponent is float32.
  Tensor p = tensor<int64_t>({4, 9}).pow(0.5);
  CHECK(p.dtype() == kFloat32);
  CHECK(p.to_vector<double>() == std::vector<double>{2, 3});
}

TEST_CASE("unary ops: special values, logical_not, large inputs", "[core]") {
  Tensor x = tensor({NAN, -0.0f, 2.f, -INFINITY});
  std::vector<double> relu = x.relu().to_vector<double>();
  CHECK(std::isnan(relu[0]));
  CHECK(relu[2] == 2.0);
  CHECK(relu[3] == 0.0);
  CHECK(std::isnan(x.clamp(-1, 1).to_vector<double>()[0]));  // NaN propagates, as PyTorch
  CHECK(x.sign().to_vector<double>()[0] == 0.0);             // as PyTorch 1.13
  CHECK(x.exp().to_vector<double>()[3] == 0.0);
  CHECK(tensor({0.f}).log().item<double>() == -INFINITY);
  CHECK(std::isnan(tensor({-1.f}).sqrt().item<double>()));
  CHECK(tensor({1e4f}).to(kFloat16).exp().item<double>() == INFINITY);  // overflows to inf

  Tensor b = tensor({1.5f, 0.f, -2.f, NAN}).logical_not();
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(tensor({3, 0}).logical_not().to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(tensor({true, false}).logical_not().to_vector<bool>() == std::vector<bool>{false, true});

  // Large tensors go through the parallel and vectorised paths.
  for (DType dt : {kFloat32, kBFloat16}) {
    INFO(dtype_name(dt));
    Tensor big = random_nonzero({300, 257}, dt);
    for (const Tensor& in : {big, big.t(), big.slice(1, 0, 257, 2)}) {
      std::vector<double> ref;
      for (double v : values(in)) ref.push_back(std::tanh(v));
      check_close(in.tanh(), ref, dt, "tanh");
    }
  }
}

TEST_CASE("isfinite, isnan, isinf and nan_to_num on NaN, infinities and every dtype", "[core]") {
  const float nan = NAN, inf = INFINITY;
  Tensor x32 = tensor({1.5f, nan, inf, -inf, -0.0f, 3e38f});
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    INFO(dtype_name(dt));
    Tensor x = x32.to(dt);  // 3e38 becomes inf in float16, stays finite in bfloat16
    const bool big_is_inf = dt == kFloat16;
    CHECK(x.isfinite().dtype() == kBool);
    CHECK(x.isfinite().to_vector<bool>() == std::vector<bool>{true, false, false, false, true, !big_is_inf});
    CHECK(x.isnan().to_vector<bool>() == std::vector<bool>{false, true, false, false, false, false});
    CHECK(x.isinf().to_vector<bool>() == std::vector<bool>{false, false, true, true, false, big_is_inf});
    // Non-contiguous input: every other element.
    CHECK(x.slice(0, 1, 6, 2).isinf().to_vector<bool>() == std::vector<bool>{false, true, big_is_inf});

    std::vector<double> r = x.nan_to_num(0.25, 10, -20).to_vector<double>();
    CHECK(r[0] == 1.5);
    CHECK(r[1] == 0.25);
    CHECK(r[2] == 10);
    CHECK(r[3] == -20);
    // Default bounds: the dtype's largest finite values.
    std::vector<double> d = x.nan_to_num().to_vector<double>();
    const double largest = dt == kFloat16 ? 65504.0 : dt == kBFloat16 ? 3.3895313892515355e38
                           : dt == kFloat32 ? double(std::numeric_limits<float>::max())
                                            : std::numeric_limits<double>::max();
    CHECK(d[1] == 0.0);
    CHECK(d[2] == largest);
    CHECK(d[3] == -largest);
    CHECK(x.nan_to_num().isfinite().all().item<bool>());
  }
  // Integers and bools are finite: masks of true / false, nan_to_num a copy of the same dtype.
  Tensor i = tensor<int64_t>({-4, 0, 9});
  CHECK(i.isfinite().to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(i.isnan().to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(tensor({true, false}).isinf().to_vector<bool>() == std::vector<bool>{false, false});
  Tensor ic = i.nan_to_num();
  CHECK(ic.dtype() == kInt64);
  CHECK(ic.to_vector<int64_t>() == std::vector<int64_t>{-4, 0, 9});
  CHECK(ic.data() != i.data());
  // Masks record no history; nan_to_num's gradient is zero where the input was not finite.
  Tensor g = tensor({1.f, nan, inf, -2.f}).requires_grad_(true);
  CHECK_FALSE(g.isfinite().requires_grad());
  g.nan_to_num().mul(tensor({2.f, 3.f, 4.f, 5.f})).sum().backward();
  CHECK(g.grad().to_vector<float>() == std::vector<float>{2.f, 0.f, 0.f, 5.f});
}

TEST_CASE("all and any over every element", "[core]") {
  CHECK(tensor({1.f, -2.f, 3.f}).all().item<bool>());
  CHECK_FALSE(tensor({1.f, 0.f, 3.f}).all().item<bool>());
  CHECK(tensor({0.f, 0.f, 0.5f}).any().item<bool>());
  CHECK_FALSE(zeros({2, 3}).any().item<bool>());
  CHECK(tensor({NAN}).any().item<bool>());  // NaN is non-zero, as in PyTorch
  CHECK(zeros({0}).all().item<bool>());     // the empty product and sum
  CHECK_FALSE(zeros({0}).any().item<bool>());
  CHECK(tensor<int64_t>({3, 1}, {2, 1}).expand({2, 4}).all().item<bool>());
  CHECK(tensor({true, false}).any().dtype() == kBool);
}

TEST_CASE("unary op errors", "[core]") {
  require_throws_with<ValueError>([] { tensor({1, 2}).pow(-1); }, {"pow", "-1"});
  require_throws_with<ValueError>([] { tensor({1.f}).clamp(std::nullopt, std::nullopt); }, {"clamp"});
  require_throws_with<ValueError>([] { tensor({1.f}).clamp(2, 1); }, {"clamp", "2", "1"});
  require_throws_with<DTypeError>([] { tensor({true}).neg(); }, {"neg", "bool"});
  require_throws_with<ValueError>([] { Tensor().exp(); }, {"exp", "undefined"});
}

TEST_CASE("unary ops gradcheck, contiguous and not", "[core]") {
  manual_seed(3);
  for (const UnaryCase& c : unary_cases()) {
    if (!backward_name(c.op)) continue;
    for (auto& [layout, x] : layouts(2, 3, kFloat64, c.low, c.high)) {
      INFO(c.name << ", " << layout);
      Tensor in = x.detach().requires_grad_(true);
      CHECK(gradcheck([&](const std::vector<Tensor>& v) { return c.fn(v[0]); }, {in}));
    }
    // The node recorded is the one the row of the case's op names.
    INFO(c.name);
    CHECK(c.fn(leaf({2, 3}, c.low, c.high)).grad_fn()->name() == backward_name(c.op));
  }
  // Ops without a gradient record no history.
  Tensor x = leaf({3});
  CHECK_FALSE(x.sign().requires_grad());
  CHECK_FALSE(x.logical_not().requires_grad());
  CHECK_FALSE((x > 0).requires_grad());
}

// ---- binary --------------------------------------------------------------------------------

TEST_CASE("binary ops match a plain loop: dtypes and broadcasting", "[core]") {
  manual_seed(4);
  for (const BinaryCase& c : binary_cases()) {
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
      const bool integer = !is_floating_point(dt);
      if (integer && !c.ints) continue;
      for (const BroadcastCase& bc : broadcast_cases()) {
        INFO(c.name << ", " << dtype_name(dt) << ", " << bc.name);
        Tensor a = random_nonzero(bc.a, dt, c.a_low, c.a_high);
        Tensor b = random_nonzero(bc.b, dt, c.b_low, c.b_high);
        Tensor y = c.fn(a, b);
        CHECK(y.dtype() == dt);
        REQUIRE(y.dim() == int64_t(std::max(bc.a.size(), bc.b.size())));
        std::vector<double> av = broadcast_ref(a, y.sizes()), bv = broadcast_ref(b, y.sizes());
        std::vector<double> ref;
        for (size_t i = 0; i < av.size(); ++i) ref.push_back(c.ref(av[i], bv[i]));
        check_close(y, ref, dt, c.name);
      }
    }
  }
}

TEST_CASE("binary ops on non-contiguous inputs", "[core]") {
  manual_seed(5);
  for (const BinaryCase& c : binary_cases()) {
    for (DType dt : float_dtypes()) {
      auto as = layouts(4, 6, dt, c.a_low, c.a_high);
      auto bs = layouts(4, 6, dt, c.b_low, c.b_high);
      for (size_t i = 0; i < as.size(); ++i) {
        const Tensor& a = as[i].second;
        const Tensor& b = bs[(i + 1) % bs.size()].second;
        INFO(c.name << ", " << dtype_name(dt) << ", " << as[i].first << " with " << bs[(i + 1) % bs.size()].first);
        std::vector<double> av = values(a), bv = values(b), ref;
        for (size_t k = 0; k < av.size(); ++k) ref.push_back(c.ref(av[k], bv[k]));
        check_close(c.fn(a, b), ref, dt, c.name);
        // Broadcast against a non-contiguous row: (4, 6) with the (6,) row 1 of a transpose.
        Tensor row = random_nonzero({6, 3}, dt, c.b_low, c.b_high).select(1, 1);
        std::vector<double> rv = broadcast_ref(row, {4, 6}), ref2;
        for (size_t k = 0; k < av.size(); ++k) ref2.push_back(c.ref(av[k], rv[k]));
        check_close(c.fn(a, row), ref2, dt, c.name);
      }
    }
  }
  // A large broadcast through the parallel path.
  Tensor a = random_nonzero({513, 130});
  Tensor b = random_nonzero({130});
  std::vector<double> av = values(a), bv = broadcast_ref(b, {513, 130}), ref;
  for (size_t k = 0; k < av.size(); ++k) ref.push_back(av[k] * bv[k]);
  check_close(a * b, ref, kFloat32, "mul");
  check_close(a.t() * b.unsqueeze(1), [&] {
    std::vector<double> r;
    std::vector<double> at = values(a.t()), bt = broadcast_ref(b.unsqueeze(1), {130, 513});
    for (size_t k = 0; k < at.size(); ++k) r.push_back(at[k] * bt[k]);
    return r;
  }(), kFloat32, "mul transposed");
}

TEST_CASE("integer binary ops", "[core]") {
  Tensor a = tensor<int64_t>({7, -7, 3, 0});
  Tensor b = tensor<int64_t>({2, 2, -4, 5});
  CHECK((a + b).to_vector<int64_t>() == std::vector<int64_t>{9, -5, -1, 5});
  CHECK((a * b).to_vector<int64_t>() == std::vector<int64_t>{14, -14, -12, 0});
  CHECK(a.sub(b, 2).to_vector<int64_t>() == std::vector<int64_t>{3, -11, 11, -10});
  // True division, as PyTorch: int / int is float32.
  Tensor q = a / b;
  CHECK(q.dtype() == kFloat32);
  CHECK(q.to_vector<double>() == std::vector<double>{3.5, -3.5, -0.75, 0});
  Tensor qs = a / 2;
  CHECK(qs.dtype() == kFloat32);
  CHECK(qs.to_vector<double>() == std::vector<double>{3.5, -3.5, 1.5, 0});
  CHECK(a.pow(tensor<int64_t>({2, 3, 0, 4})).to_vector<int64_t>() == std::vector<int64_t>{49, -343, 1, 0});
  CHECK(maximum(a, b).to_vector<int64_t>() == std::vector<int64_t>{7, 2, 3, 5});
  // Large int64 values stay exact (no trip through double).
  Tensor big = tensor<int64_t>({(int64_t(1) << 53) + 1});
  CHECK((big + tensor<int64_t>({2})).item<int64_t>() == (int64_t(1) << 53) + 3);
  // bool: + is or, * is and (as PyTorch).
  Tensor t = tensor({true, false, true, false}), f = tensor({true, true, false, false});
  CHECK((t + f).dtype() == kBool);
  CHECK((t + f).to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK((t * f).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  require_throws_with<DTypeError>([&] { t - f; }, {"sub", "bool"});
}

TEST_CASE("type promotion of binary ops", "[core]") {
  struct Case {
    DType a, b, out;
  };
  // torch.result_type for tensors of these dtypes (same for add, sub, mul).
  const std::vector<Case> cases = {
      {kInt64, kFloat32, kFloat32}, {kInt32, kFloat64, kFloat64}, {kFloat16, kFloat32, kFloat32},
      {kBFloat16, kFloat16, kFloat32}, {kInt32, kInt64, kInt64}, {kInt32, kFloat16, kFloat16},
      {kBool, kInt32, kInt32}, {kBool, kBFloat16, kBFloat16}, {kFloat16, kFloat64, kFloat64},
  };
  for (const Case& c : cases) {
    INFO(dtype_name(c.a) << " with " << dtype_name(c.b));
    Tensor a = ones({2, 2}, c.a), b = ones({2}, c.b);
    CHECK((a + b).dtype() == c.out);
    CHECK((b * a).dtype() == c.out);
    CHECK((a - b).dtype() == c.out);
    CHECK((a + b).to_vector<double>() == std::vector<double>(4, 2.0));
    CHECK((a < b).dtype() == kBool);
    CHECK(maximum(a, b).dtype() == c.out);
  }
  // Division is true division: integers give float32.
  CHECK((ones({2}, kInt32) / ones({2}, kInt64)).dtype() == kFloat32);
  CHECK((ones({2}, kInt32) / ones({2}, kFloat16)).dtype() == kFloat16);
  CHECK((ones({2}, kInt64).pow(ones({2}, kFloat32))).dtype() == kFloat32);
  // Python scalars: a float scalar makes an integer tensor float32; otherwise the
  // tensor's dtype wins (torch.ones(2, dtype=torch.float16) * 2.5 is float16).
  CHECK((ones({2}, kInt64) * 2.5).dtype() == kFloat32);
  CHECK((ones({2}, kInt32) + 2).dtype() == kInt32);
  CHECK((ones({2}, kFloat16) * 2.5).dtype() == kFloat16);
  CHECK((ones({2}, kBFloat16) + 1).dtype() == kBFloat16);
  CHECK((ones({2}, kBool) + 1).dtype() == kInt64);
  CHECK((ones({2}, kBool) * true).dtype() == kBool);
  CHECK((2.5 - ones({2}, kInt64)).dtype() == kFloat32);
  CHECK((1 / ones({2}, kInt32)).dtype() == kFloat32);
  CHECK((ones({2}, kInt32) < 2.5).dtype() == kBool);
  CHECK((ones({2}, kInt32) < 2.5).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK((ones({2}, kFloat16) * 2.5).to_vector<double>() == std::vector<double>{2.5, 2.5});
}

TEST_CASE("comparisons return bool", "[core]") {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    INFO(dtype_name(dt));
    Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).to(dt);
    Tensor b = from_vector(std::vector<double>{3, 2, 1}).to(dt);  // broadcast (3,)
    struct Cmp {
      const char* name;
      Tensor got;
      std::vector<bool> want;
    };
    const std::vector<Cmp> cmps = {
        {"eq", a.eq(b), {false, true, false, false, false, false}},
        {"ne", a.ne(b), {true, false, true, true, true, true}},
        {"lt", a.lt(b), {true, false, false, false, false, false}},
        {"le", a.le(b), {true, true, false, false, false, false}},
        {"gt", a.gt(b), {false, false, true, true, true, true}},
        {"ge", a.ge(b), {false, true, true, true, true, true}},
        {"<", a < b, {true, false, false, false, false, false}},
        {"<=", a <= b, {true, true, false, false, false, false}},
        {">", a > b, {false, false, true, true, true, true}},
        {">=", a >= b, {false, true, true, true, true, true}},
        {"eq scalar", a.eq(4), {false, false, false, true, false, false}},
        {"ne scalar", a.ne(4), {true, true, true, false, true, true}},
        {"lt scalar", a.lt(2.5), {true, true, false, false, false, false}},
        {"le scalar", a.le(2), {true, true, false, false, false, false}},
        {"gt scalar", a.gt(5), {false, false, false, false, false, true}},
        {"ge scalar", a.ge(5), {false, false, false, false, true, true}},
        {"< scalar", a < 3, {true, true, false, false, false, false}},
        {"<= scalar", a <= 3, {true, true, true, false, false, false}},
        {"> scalar", a > 3, {false, false, false, true, true, true}},
        {">= scalar", a >= 3, {false, false, true, true, true, true}},
        {"transposed", a.t().gt(b.unsqueeze(1)), {false, true, false, true, true, true}},
    };
    for (const Cmp& c : cmps) {
      INFO(c.name);
      CHECK(c.got.dtype() == kBool);
      CHECK(c.got.to_vector<bool>() == c.want);
    }
  }
  // NaN compares unequal to everything.
  Tensor n = tensor({NAN});
  CHECK_FALSE(n.eq(n).item<bool>());
  CHECK(n.ne(n).item<bool>());
  CHECK_FALSE((n < 1).item<bool>());
  CHECK(tensor({true, false}).eq(tensor({true, true})).to_vector<bool>() == std::vector<bool>{true, false});
}

TEST_CASE("maximum and minimum: NaN propagates, ties split the gradient", "[core]") {
  Tensor a = tensor({NAN, 1.f, 2.f}), b = tensor({1.f, NAN, 3.f});
  std::vector<double> mx = maximum(a, b).to_vector<double>(), mn = minimum(a, b).to_vector<double>();
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(mx[2] == 3.0);
  CHECK(std::isnan(mn[0]));
  CHECK(std::isnan(mn[1]));
  CHECK(mn[2] == 2.0);

  Tensor x = from_vector(std::vector<double>{1, 2, 3}).requires_grad_();
  Tensor y = from_vector(std::vector<double>{1, 5, 0}).requires_grad_();
  maximum(x, y).backward(ones({3}, kFloat64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.5, 0, 1});
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0.5, 1, 0});
  x.mutable_grad() = Tensor();
  y.mutable_grad() = Tensor();
  minimum(x, y).backward(ones({3}, kFloat64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.5, 1, 0});
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0.5, 0, 1});
}

TEST_CASE("binary ops gradcheck: broadcast, transposed, sliced", "[core]") {
  manual_seed(6);
  struct Inputs {
    const char* name;
    Shape a, b;
  };
  const std::vector<Inputs> shapes = {
      {"same", {2, 3}, {2, 3}}, {"row", {2, 3}, {3}}, {"column", {2, 1}, {1, 3}}, {"scalar", {2, 3}, {}},
      {"up", {3}, {2, 2, 3}},
  };
  for (const BinaryCase& c : binary_cases()) {
    REQUIRE(kernels::is_differentiable(c.op));
    Fn f = [&](const std::vector<Tensor>& in) { return c.fn(in[0], in[1]); };
    for (const Inputs& s : shapes) {
      INFO(c.name << ", " << s.name);
      CHECK(gradcheck(f, {leaf(s.a, c.a_low, c.a_high), leaf(s.b, c.b_low, c.b_high)}));
    }
    auto as = layouts(2, 3, kFloat64, c.a_low, c.a_high);
    auto bs = layouts(2, 3, kFloat64, c.b_low, c.b_high);
    for (size_t i = 0; i < as.size(); ++i) {
      INFO(c.name << ", " << as[i].first << " with " << bs[(i + 2) % 3].first);
      CHECK(gradcheck(f, {leaf_like_layout(as[i].second), leaf_like_layout(bs[(i + 2) % 3].second)}));
    }
    // Only one side requires grad.
    INFO(c.name << ", one side");
    CHECK(gradcheck(f, {leaf({2, 3}, c.a_low, c.a_high), random_nonzero({3}, kFloat64, c.b_low, c.b_high)}));
    CHECK(gradcheck(f, {random_nonzero({2, 3}, kFloat64, c.a_low, c.a_high), leaf({2, 3}, c.b_low, c.b_high)}));
    // The node recorded is the one the row of the case's op names.
    CHECK(f({leaf({2, 3}, c.a_low, c.a_high), leaf({3}, c.b_low, c.b_high)}).grad_fn()->name() ==
          kernels::op_info(c.op).backward_name);
  }
}

TEST_CASE("binary op errors name the op and both shapes", "[core]") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  require_throws_with<ShapeError>([&] { a + b; }, {"add", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { a - b; }, {"sub", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { b * a; }, {"mul", "(4,)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { a / b; }, {"div", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { a.pow(b); }, {"pow", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { maximum(a, b); }, {"maximum", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { minimum(a, b); }, {"minimum", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { a < b; }, {"lt", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { a.eq(b); }, {"eq", "(2, 3)", "(4,)"});
  require_throws_with<ShapeError>([&] { zeros({2, 3, 4}) * zeros({3, 3, 1}); }, {"mul", "(2, 3, 4)", "(3, 3, 1)"});
  require_throws_with<ShapeError>([] { broadcast_shapes({5}, {2, 4}, "myop"); }, {"myop", "(5,)", "(2, 4)"});
  CHECK(broadcast_shapes({5, 1, 3}, {4, 1}, "op") == Shape{5, 4, 3});
  CHECK(broadcast_shapes({}, {2}, "op") == Shape{2});
  CHECK(broadcast_shapes({0}, {1}, "op") == Shape{0});
}

// ---- every kernel op, from the op tables (kernels/math/elementwise_ops.h) --------------------------

TEST_CASE("every unary kernel matches its reference in every float dtype", "[core]") {
  manual_seed(21);
  for (const UnaryOpCase& c : kUnaryOpCases) {  // every UnaryOp (elementwise_cases.h)
    for (DType dt : float_dtypes()) {
      INFO(op_label(c.op) << ", " << dtype_name(dt));
      Tensor x = random_nonzero({5, 7}, dt, c.low, c.high);
      Tensor out = empty(x.sizes(), kernels::outputs_bool(c.op) ? kBool : dt);
      kernels::unary(c.op, out, x, c.arg0, c.arg1);
      std::vector<double> ref;
      for (double v : values(x)) ref.push_back(c.ref(v, c.arg0, c.arg1));
      check_close(out, ref, out.dtype(), op_label(c.op));
    }
  }
}

TEST_CASE("every binary kernel matches its reference in every float dtype", "[core]") {
  manual_seed(22);
  for (const BinaryOpCase& c : kBinaryOpCases) {  // every BinaryOp (elementwise_cases.h)
    for (DType dt : float_dtypes()) {
      INFO(op_label(c.op) << ", " << dtype_name(dt));
      Tensor a = random_nonzero({5, 7}, dt, c.a_low, c.a_high), b = random_nonzero({5, 7}, dt);
      Tensor out = empty(a.sizes(), kernels::outputs_bool(c.op) ? kBool : dt);
      kernels::binary(c.op, out, a, b, kBinaryAlpha);
      std::vector<double> av = values(a), bv = values(b), ref;
      for (size_t i = 0; i < av.size(); ++i) ref.push_back(c.ref(av[i], bv[i], kBinaryAlpha));
      check_close(out, ref, out.dtype(), op_label(c.op));
    }
  }
}

namespace {

// Every row of an op table has a name (error messages show it), and no two rows share one
// except the pairs of row indices in `twins`. A backward node's name ends in "Backward".
template <typename Row, size_t N>
void check_names(const Row (&rows)[N], const std::vector<std::pair<int, int>>& twins = {}) {
  std::map<std::string, int> first_row;  // name -> the first row that has it
  for (const Row& r : rows) {
    INFO(op_label(r.op));
    REQUIRE(r.name != nullptr);
    CHECK(std::string(r.name) != "");
    if (r.backward_name) CHECK(std::string(r.backward_name).ends_with("Backward"));
    const auto [it, first] = first_row.emplace(r.name, int(r.op));
    if (!first) {
      INFO("row " << it->second << " has the same name");
      CHECK(std::find(twins.begin(), twins.end(), std::pair{it->second, int(r.op)}) != twins.end());
    }
  }
}

}  // namespace

TEST_CASE("op tables: every row has a name, and no two rows share one", "[core]") {
  // gelu(approximate = "tanh") is gelu to its users: its two kernels share the name.
  check_names(kernels::kUnaryOps, {{int(UnaryOp::Gelu), int(UnaryOp::GeluTanh)}});
  check_names(kernels::kBinaryOps);
  check_names(kernels::kReduceOps);
}

TEST_CASE("dispatch_enum throws InternalError for a value outside its enum", "[core]") {
  int runs = 0;
  const auto run_unary = [&]<UnaryOp>() { ++runs; };
  kernels::dispatch_enum(UnaryOp::Exp, run_unary);
  CHECK(runs == 1);
  require_throws_with<InternalError>([&] { kernels::dispatch_enum(UnaryOp::kCount, run_unary); },
                                     {"dispatch_enum", "UnaryOp value " + std::to_string(int(UnaryOp::kCount))});
  require_throws_with<InternalError>([&] { kernels::dispatch_enum(BinaryOp(-1), [&]<BinaryOp>() { ++runs; }); },
                                     {"dispatch_enum", "BinaryOp value -1"});
  CHECK(runs == 1);  // nothing ran for them
  // The kernels pass the error on instead of leaving their output unwritten.
  Tensor x = ones({3}), out = empty({3}), total = empty({});
  require_throws_with<InternalError>([&] { kernels::unary(UnaryOp::kCount, out, x); }, {"UnaryOp"});
  require_throws_with<InternalError>([&] { kernels::binary(BinaryOp::kCount, out, x, x); }, {"BinaryOp"});
  require_throws_with<InternalError>([&] { kernels::reduce(ReduceOp::kCount, total, x, {0}); }, {"ReduceOp"});
}

// ---- in place ------------------------------------------------------------------------------

TEST_CASE("in-place binary ops match the out-of-place ones", "[core]") {
  manual_seed(7);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32}) {
    const bool integer = !is_floating_point(dt);
    INFO(dtype_name(dt));
    Tensor a = random_nonzero({3, 4}, dt), b = random_nonzero({4}, dt);
    std::vector<double> av = values(a), bv = broadcast_ref(b, {3, 4});
    auto expect = [&](const std::function<double(double, double)>& op) {
      std::vector<double> r;
      for (size_t i = 0; i < av.size(); ++i) r.push_back(op(av[i], bv[i]));
      return r;
    };
    struct Case {
      const char* name;
      std::function<void(Tensor&)> apply;
      std::function<double(double, double)> ref;
      bool ints;
    };
    const std::vector<Case> cases = {
        {"add_", [&](Tensor& t) { t.add_(b); }, [](double x, double y) { return x + y; }, true},
        {"add_ alpha", [&](Tensor& t) { t.add_(b, 2); }, [](double x, double y) { return x + 2 * y; }, true},
        {"sub_", [&](Tensor& t) { t.sub_(b); }, [](double x, double y) { return x - y; }, true},
        {"sub_ alpha", [&](Tensor& t) { t.sub_(b, 3); }, [](double x, double y) { return x - 3 * y; }, true},
        {"mul_", [&](Tensor& t) { t.mul_(b); }, [](double x, double y) { return x * y; }, true},
        {"div_", [&](Tensor& t) { t.div_(b); }, [](double x, double y) { return x / y; }, false},
        {"+=", [&](Tensor& t) { t += b; }, [](double x, double y) { return x + y; }, true},
        {"-=", [&](Tensor& t) { t -= b; }, [](double x, double y) { return x - y; }, true},
        {"*=", [&](Tensor& t) { t *= b; }, [](double x, double y) { return x * y; }, true},
        {"/=", [&](Tensor& t) { t /= b; }, [](double x, double y) { return x / y; }, false},
        {"add_ scalar", [](Tensor& t) { t.add_(2); }, [](double x, double) { return x + 2; }, true},
        {"sub_ scalar", [](Tensor& t) { t.sub_(3); }, [](double x, double) { return x - 3; }, true},
        {"mul_ scalar", [](Tensor& t) { t.mul_(-2); }, [](double x, double) { return -2 * x; }, true},
        {"div_ scalar", [](Tensor& t) { t.div_(4); }, [](double x, double) { return x / 4; }, false},
        {"+= scalar", [](Tensor& t) { t += 2; }, [](double x, double) { return x + 2; }, true},
        {"-= scalar", [](Tensor& t) { t -= 2; }, [](double x, double) { return x - 2; }, true},
        {"*= scalar", [](Tensor& t) { t *= 3; }, [](double x, double) { return 3 * x; }, true},
        {"/= scalar", [](Tensor& t) { t /= 2; }, [](double x, double) { return x / 2; }, false},
    };
    for (const Case& c : cases) {
      if (integer && !c.ints) continue;
      INFO(c.name);
      Tensor t = a.clone();
      const uint64_t version = t.version();
      void* data = t.data();
      c.apply(t);
      CHECK(t.data() == data);  // really in place
      CHECK(t.version() == version + 1);
      CHECK(t.dtype() == dt);
      check_close(t, expect(c.ref), dt, c.name);
      // Through a transposed view: the base sees the result transposed.
      Tensor base = a.t().contiguous();  // (4, 3)
      Tensor view = base.t();            // (3, 4), non-contiguous, values of a
      c.apply(view);
      check_close(base.t(), expect(c.ref), dt, c.name);
    }
  }
  // A float scalar into a float16 tensor stays float16.
  Tensor h = ones({2}, kFloat16);
  h.mul_(2.5);
  CHECK(h.to_vector<double>() == std::vector<double>{2.5, 2.5});
  // Self as the other operand.
  Tensor s = tensor({1.f, 2.f, 3.f});
  s.mul_(s);
  CHECK(s.to_vector<double>() == std::vector<double>{1, 4, 9});
}

TEST_CASE("in-place errors: dtype, shape, leaf", "[core]") {
  Tensor i = zeros({2, 3}, kInt64);
  require_throws_with<DTypeError>([&] { i.add_(ones({3})); }, {"add", "float32", "int64"});
  require_throws_with<DTypeError>([&] { i.div_(ones({3}, kInt64)); }, {"div", "float32", "int64"});
  require_throws_with<DTypeError>([&] { i.div_(2); }, {"div", "float32", "int64"});
  require_throws_with<DTypeError>([&] { i += 0.5; }, {"add", "float32", "int64"});
  Tensor bl = zeros({2}, kBool);
  require_throws_with<DTypeError>([&] { bl.add_(ones({2}, kInt32)); }, {"add", "int32", "bool"});
  // float16 += float32 stores the float32 result as float16, as PyTorch (same kind).
  Tensor h = ones({3}, kFloat16);
  h.add_(full({3}, 0.5));
  CHECK(h.dtype() == kFloat16);
  CHECK(h.to_vector<double>() == std::vector<double>(3, 1.5));
  Tensor i32 = ones({2}, kInt32);
  i32.mul_(full({2}, 3, kInt64));
  CHECK(i32.to_vector<int32_t>() == std::vector<int32_t>{3, 3});

  Tensor a = zeros({3, 1});
  require_throws_with<ShapeError>([&] { a.add_(zeros({3, 4})); }, {"add", "(3, 4)", "(3, 1)"});
  require_throws_with<ShapeError>([&] { a.mul_(zeros({2})); }, {"mul", "(3, 1)", "(2,)"});

  Tensor x = leaf({2, 3});
  require_throws_with<AutogradError>([&] { x.add_(1.0); }, {"add", "leaf", "(2, 3)"});
  require_throws_with<AutogradError>([&] { x.mul_(zeros({2, 3}, kFloat64)); }, {"mul", "leaf", "(2, 3)"});
  require_throws_with<AutogradError>([&] { x -= 1.0; }, {"sub", "leaf"});
  require_throws_with<AutogradError>([&] { x.zero_(); }, {"fill_", "leaf", "(2, 3)"});
  require_throws_with<AutogradError>([&] { x.clamp_(0, 1); }, {"clamp_", "leaf"});
  require_throws_with<AutogradError>([&] { x.masked_fill_(zeros({3}, kBool), 1.0); }, {"masked_fill_", "leaf"});
  // Allowed under NoGradGuard (an optimizer step).
  {
    NoGradGuard no_grad;
    x.mul_(0.0);
    x.add_(1.0);
  }
  CHECK(x.to_vector<double>() == std::vector<double>(6, 1.0));
  CHECK(x.is_leaf());
}

TEST_CASE("in-place ops with autograd", "[core]") {
  manual_seed(8);
  // y = x * 1; y.op_(...) records the op and y takes its history.
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"add_", [](auto& in) { Tensor y = in[0] * 1.0; y.add_(in[1], 2.5); return y; }},
      {"sub_", [](auto& in) { Tensor y = in[0] * 1.0; y.sub_(in[1]); return y; }},
      {"mul_", [](auto& in) { Tensor y = in[0] * 1.0; y.mul_(in[1]); return y; }},
      {"div_", [](auto& in) { Tensor y = in[0] * 1.0; y.div_(in[1]); return y; }},
      {"ops", [](auto& in) { Tensor y = in[0].sin(); y *= in[1]; y += 1.0; y /= 2.0; y -= in[0]; return y * y; }},
      {"scalar ops", [](auto& in) { Tensor y = in[0] + in[1]; y.mul_(3.0); y.add_(1.0); y.div_(-2.0); y.sub_(0.5); return y; }},
      {"clamp_", [](auto& in) { Tensor y = in[0] * in[1]; y.clamp_(-0.5, 1.0); return y; }},
      {"masked_fill_", [](auto& in) { Tensor y = in[0] * in[1]; y.masked_fill_(y > 0.5, 2.0); return y; }},
      {"fill_", [](auto& in) { Tensor y = in[0] * in[1]; y.fill_(3.0); return y + in[0]; }},
      {"zero_", [](auto& in) { Tensor y = in[0] * in[1]; y.zero_(); return y + in[1]; }},
      {"into constant", [](auto& in) { Tensor y = zeros({2, 3}, kFloat64); y.add_(in[0]); y.mul_(in[1]); return y; }},
  };
  for (const auto& [name, f] : cases) {
    INFO(name);
    CHECK(gradcheck(f, {leaf({2, 3}), leaf({3})}));
  }
  Tensor x = leaf({3});
  Tensor y = x * 2.0;
  y.add_(1.0);
  CHECK(y.grad_fn()->name() == "AddBackward");
  CHECK_FALSE(y.is_leaf());
  Tensor z = zeros({3}, kFloat64);
  z.mul_(x);
  CHECK(z.requires_grad());
  CHECK(z.grad_fn()->name() == "MulBackward");
}

// ---- where, masked_fill, clamp ---------------------------------------------------------------

TEST_CASE("where", "[core]") {
  manual_seed(9);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool}) {
    INFO(dtype_name(dt));
    Tensor cond = rand({3, 4}) > 0.5;
    Tensor a = random_nonzero({3, 4}, dt == kBool ? kInt32 : dt).to(dt);
    Tensor b = random_nonzero({4}, dt == kBool ? kInt32 : dt).to(dt);
    Tensor w = where(cond, a, b);
    CHECK(w.dtype() == dt);
    std::vector<bool> c = cond.to_vector<bool>();
    std::vector<double> av = values(a), bv = broadcast_ref(b, {3, 4}), ref;
    for (size_t i = 0; i < c.size(); ++i) ref.push_back(c[i] ? av[i] : bv[i]);
    check_close(w, ref, dt, "where");
    // Broadcast condition, transposed operands.
    Tensor ct = tensor({true, false, true});
    Tensor at = a.t();  // (4, 3)
    std::vector<double> atv = values(at), ref2;
    for (size_t i = 0; i < atv.size(); ++i) ref2.push_back(i % 3 != 1 ? atv[i] : 0.0);
    check_close(where(ct, at, zeros({}, dt)), ref2, dt, "where broadcast");
  }
  CHECK(where(tensor({true, false}), ones({2}, kInt32), full({2}, 0.5)).dtype() == kFloat32);
  CHECK(gradcheck([](auto& in) { return where(in[2] > 0, in[0], in[1]); },
                  {leaf({2, 3}), leaf({3}), random_nonzero({2, 1}, kFloat64)}));
  CHECK(gradcheck([](auto& in) { return where(in[2] > 0, in[0].t(), in[1]); },
                  {leaf({3, 2}), leaf({}), random_nonzero({2, 3}, kFloat64)}));
  require_throws_with<DTypeError>([] { where(ones({2}), ones({2}), ones({2})); }, {"where", "bool", "float32"});
  require_throws_with<ShapeError>([] { where(ones({2}, kBool), ones({3}), ones({3})); }, {"where", "(2,)", "(3,)"});
}

TEST_CASE("masked_fill", "[core]") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mask = tensor({true, false, true});
  CHECK(x.masked_fill(mask, -1).to_vector<double>() == std::vector<double>{-1, 2, -1, -1, 5, -1});
  CHECK(x.t().masked_fill(tensor({false, true}), 0).to_vector<double>() == std::vector<double>{1, 0, 2, 0, 3, 0});
  Tensor i = tensor({1, 2, 3});
  CHECK(i.masked_fill(mask, 9).dtype() == kInt32);
  CHECK(i.masked_fill(mask, 9).to_vector<int32_t>() == std::vector<int32_t>{9, 2, 9});
  Tensor h = ones({2, 3}, kFloat16);
  h.masked_fill_(x > 3, -INFINITY);
  std::vector<double> hv = h.to_vector<double>();
  CHECK(hv == std::vector<double>{1, 1, 1, -INFINITY, -INFINITY, -INFINITY});
  const uint64_t v = x.version();
  x.masked_fill_(mask, 0);
  CHECK(x.version() == v + 1);
  CHECK(x.to_vector<double>() == std::vector<double>{0, 2, 0, 0, 5, 0});

  CHECK(gradcheck([](auto& in) { return in[0].masked_fill(in[0] > 0.5, 1.5); }, {leaf({2, 3})}));
  CHECK(gradcheck([](auto& in) { return in[0].t().masked_fill(tensor({true, false}), 0.0); }, {leaf({2, 3})}));
  require_throws_with<DTypeError>([&] { x.masked_fill(ones({3}), 0); }, {"masked_fill", "bool", "float32"});
  require_throws_with<ShapeError>([&] { x.masked_fill(ones({4, 2, 3}, kBool), 0); },
                                  {"masked_fill", "(4, 2, 3)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { x.masked_fill(ones({2}, kBool), 0); }, {"masked_fill", "(2, 3)", "(2,)"});
}

TEST_CASE("clamp and clamp_", "[core]") {
  Tensor x = tensor({-3.f, -0.5f, 0.5f, 3.f});
  CHECK(x.clamp(-1, 1).to_vector<double>() == std::vector<double>{-1, -0.5, 0.5, 1});
  CHECK(x.clamp(0, std::nullopt).to_vector<double>() == std::vector<double>{0, 0, 0.5, 3});
  CHECK(x.clamp(std::nullopt, 0).to_vector<double>() == std::vector<double>{-3, -0.5, 0, 0});
  Tensor y = x.clone();
  y.clamp_(-2, 2);
  CHECK(y.to_vector<double>() == std::vector<double>{-2, -0.5, 0.5, 2});
  // The gradient passes where the value was inside [min, max].
  Tensor l = from_vector(std::vector<double>{-3, -0.5, 0.5, 3}).requires_grad_();
  l.clamp(-1, 1).backward(ones({4}, kFloat64));
  CHECK(l.grad().to_vector<double>() == std::vector<double>{0, 1, 1, 0});
  CHECK(gradcheck([](auto& in) { return in[0].clamp(-1, 1); }, {leaf({3, 4})}));
  CHECK(gradcheck([](auto& in) { return in[0].t().clamp(std::nullopt, 0.5); }, {leaf({3, 4})}));
}

TEST_CASE("elementwise ops on empty tensors broadcast to an empty result", "[core]") {
  // An outer dim of size 0 beside a broadcast one: nothing is visited (the strided loop's
  // odometer once divided by that 0; UBSan in the sanitize preset caught it).
  const Tensor a = zeros({0, 8}), b = ones({0, 1}), c = ones({3, 0, 1});
  CHECK((a - b).sizes() == Shape{0, 8});
  CHECK((c * a).sizes() == Shape{3, 0, 8});
  CHECK(a.exp().sizes() == Shape{0, 8});
  CHECK(a.sum().item<double>() == 0);
}
