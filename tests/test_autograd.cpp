// The autograd engine: accumulation, graph shapes (diamonds, shared inputs, multi-output
// ops), retain_graph, hooks, retain_grad, grad mode and anomaly mode, saved-tensor version
// checks, loom::grad, and gradcheck itself.
#include <pthread.h>

#include <thread>

#include "autograd/function.h"
#include "autograd/node.h"
#include "core/cuda_emulation.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

std::vector<double> doubles(const Tensor& t) { return t.to_vector<double>(); }

Tensor vec(std::vector<double> v) { return from_vector(v); }

Tensor vec_leaf(std::vector<double> v) { return from_vector(v).requires_grad_(true); }

// x * x recorded by hand with the backward factor * x * grad: right for factor 2, wrong
// (deliberately) otherwise. name must be a string literal.
Tensor square_with_backward(const Tensor& x, double factor, const char* name) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x * x;
  }
  if (needs_grad(x)) {
    record(name, {x}, {out}, {x}, [factor](BackwardContext& ctx) {
      return std::vector<Tensor>{ctx.grad() * ctx.saved[0] * factor};
    });
  }
  return out;
}

Tensor right_square(const Tensor& x) { return square_with_backward(x, 2.0, "RightSquareBackward"); }
Tensor wrong_square(const Tensor& x) { return square_with_backward(x, 3.0, "WrongSquareBackward"); }

}  // namespace

TEST_CASE("gradients accumulate into .grad over backward calls", "[autograd]") {
  Tensor x = vec_leaf({1, -2, 3});
  (x * x).backward(ones({3}, kFloat64));
  CHECK(doubles(x.grad()) == std::vector<double>{2, -4, 6});
  (x * 3.0).backward(ones({3}, kFloat64));
  CHECK(doubles(x.grad()) == std::vector<double>{5, -1, 9});
  // .grad is a leaf without history, and can be cleared.
  CHECK_FALSE(x.grad().requires_grad());
  CHECK(x.grad().dtype() == kFloat64);
  x.mutable_grad() = Tensor();
  CHECK_FALSE(x.grad().defined());
  (x * 2.0).backward(ones({3}, kFloat64));
  CHECK(doubles(x.grad()) == std::vector<double>{2, 2, 2});
  // A backward from the leaf itself.
  Tensor l = vec_leaf({1, 2});
  l.backward(vec({3, 4}));
  CHECK(doubles(l.grad()) == std::vector<double>{3, 4});
  // A scalar root needs no gradient argument.
  Tensor s = scalar_tensor(3.0, kFloat64).requires_grad_();
  (s * s * s).backward();
  CHECK(s.grad().item<double>() == 27.0);
  // The gradient of the user's tensor is not aliased: accumulating does not modify it.
  Tensor g = vec({1, 1, 1});
  Tensor y = vec_leaf({0, 0, 0});
  y.backward(g);
  y.backward(g);
  CHECK(doubles(g) == std::vector<double>{1, 1, 1});
  CHECK(doubles(y.grad()) == std::vector<double>{2, 2, 2});
}

TEST_CASE("diamonds, shared inputs and multi-output ops", "[autograd]") {
  // c = (2x) * exp(x): dc/dx = 2 exp(x) + 2x exp(x).
  Tensor x = vec_leaf({0.5, -1, 2});
  Tensor a = x * 2.0, b = x.exp();
  (a * b).backward(ones({3}, kFloat64));
  std::vector<double> xv = doubles(x), ref;
  for (double v : xv) ref.push_back(2 * std::exp(v) + 2 * v * std::exp(v));
  check_close(x.grad(), ref, kFloat64);

  // One intermediate used many times: z = y + y*y + y, y = x*x.
  Tensor w = vec_leaf({1.5, -0.5});
  Tensor y = w * w;
  (y + y * y + y).backward(ones({2}, kFloat64));
  std::vector<double> wv = doubles(w), ref2;
  for (double v : wv) ref2.push_back(2 * 2 * v + 4 * v * v * v);
  check_close(w.grad(), ref2, kFloat64);

  // The same tensor as both operands.
  Tensor s = vec_leaf({3});
  (s * s).backward(ones({1}, kFloat64));
  CHECK(s.grad().item<double>() == 6.0);

  // Outputs of one multi-output op used separately (unbind: one node, two outputs).
  Tensor m = leaf({2, 3});
  std::vector<Tensor> rows = m.unbind(0);
  (rows[0] * 2.0 + rows[1] * 3.0).backward(ones({3}, kFloat64));
  CHECK(doubles(m.grad()) == std::vector<double>{2, 2, 2, 3, 3, 3});

  // Only part of a multi-output op used.
  Tensor p = leaf({4});
  std::vector<Tensor> halves = p.split(2);
  halves[1].backward(vec({5, 6}));
  CHECK(doubles(p.grad()) == std::vector<double>{0, 0, 5, 6});

  CHECK(gradcheck([](auto& in) {
    Tensor u = in[0].sin(), v = in[0] * in[1];
    return u * v + v.exp() - u;
  }, {leaf({2, 3}), leaf({3})}));
}

TEST_CASE("retain_graph and backward through a freed graph", "[autograd]") {
  Tensor x = vec_leaf({1, 2});
  Tensor w = vec_leaf({3, 4});
  Tensor y = x * w;
  y.backward(ones({2}, kFloat64), /*retain_graph=*/true);
  y.backward(ones({2}, kFloat64));  // the graph was kept for this one
  CHECK(doubles(x.grad()) == std::vector<double>{6, 8});
  CHECK(doubles(w.grad()) == std::vector<double>{2, 4});
  require_throws_with<AutogradError>([&] { y.backward(ones({2}, kFloat64)); },
                                     {"MulBackward", "second time", "retain_graph"});
  Tensor e = x.exp();
  e.backward(ones({2}, kFloat64));
  require_throws_with<AutogradError>([&] { e.backward(ones({2}, kFloat64)); }, {"ExpBackward", "retain_graph"});
  // A fresh graph from the same leaves is fine.
  x.mutable_grad() = Tensor();
  (x * w).backward(ones({2}, kFloat64));
  CHECK(doubles(x.grad()) == std::vector<double>{3, 4});
}

TEST_CASE("backward argument errors", "[autograd]") {
  Tensor x = leaf({2, 3});
  Tensor y = x * 2.0;
  require_throws_with<AutogradError>([&] { y.backward(); }, {"backward", "scalar", "(2, 3)"});
  require_throws_with<ShapeError>([&] { y.backward(ones({3, 2}, kFloat64)); }, {"backward", "(3, 2)", "(2, 3)"});
  require_throws_with<AutogradError>([] { ones({2}).backward(ones({2})); }, {"backward", "(2,)", "require grad"});
  // backward(gradient) for a non-scalar: a vector-Jacobian product; other dtypes are cast.
  y.backward(full({2, 3}, 0.5, kFloat32));
  CHECK(doubles(x.grad()) == std::vector<double>(6, 1.0));
  CHECK(x.grad().dtype() == kFloat64);
}

TEST_CASE("requires_grad rules", "[autograd]") {
  require_throws_with<DTypeError>([] { ones({2}, kInt64).requires_grad_(); }, {"requires_grad", "int64"});
  require_throws_with<DTypeError>([] { ones({2}, kBool).requires_grad_(); }, {"requires_grad", "bool"});
  Tensor x = leaf({2});
  Tensor y = x * 2.0;
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  CHECK(x.is_leaf());
  require_throws_with<AutogradError>([&] { y.requires_grad_(false); }, {"requires_grad_", "MulBackward", "detach"});
  // Ops on tensors that do not require grad record nothing.
  Tensor c = ones({2}, kFloat64);
  CHECK_FALSE((c * 2.0).requires_grad());
  CHECK((c * 2.0).grad_fn() == nullptr);
  CHECK((c * x).requires_grad());
  // A leaf can stop requiring grad.
  Tensor l = leaf({2});
  l.requires_grad_(false);
  CHECK_FALSE(l.requires_grad());
  CHECK_FALSE((l * 2.0).requires_grad());
  // Integer results of differentiable inputs do not require grad.
  CHECK_FALSE(x.gt(0).requires_grad());
  CHECK_FALSE(x.to(kInt64).requires_grad());
  // Hooks and retain_grad need a tensor that requires grad.
  require_throws_with<AutogradError>([&] { c.register_hook([](const Tensor& g) { return g; }); },
                                     {"register_hook", "(2,)"});
  require_throws_with<AutogradError>([&] { c.retain_grad(); }, {"retain_grad", "(2,)"});
  require_throws_with<AutogradError>([&] { y.register_post_accumulate_grad_hook([](const Tensor&) {}); },
                                     {"register_post_accumulate_grad_hook", "leaf", "(2,)"});
}

TEST_CASE("detach", "[autograd]") {
  Tensor x = vec_leaf({1, 2, 3});
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.data() == x.data());  // same storage
  // No gradient flows through the detached side: d(x * stop(x))/dx = stop(x).
  (x * x.detach()).backward(ones({3}, kFloat64));
  CHECK(doubles(x.grad()) == std::vector<double>{1, 2, 3});
  // detach_ makes a non-leaf a leaf without history.
  Tensor y = x * 2.0;
  y.detach_();
  CHECK_FALSE(y.requires_grad());
  CHECK(y.is_leaf());
  CHECK(doubles(y) == std::vector<double>{2, 4, 6});
}

TEST_CASE("NoGradGuard and EnableGradGuard are thread-local", "[autograd]") {
  Tensor x = leaf({2});
  CHECK(GradMode::is_enabled());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(GradMode::is_enabled());
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    CHECK_FALSE(x.exp().requires_grad());
    CHECK_FALSE(x.view({2, 1}).requires_grad());
    // Another thread still records.
    bool other_records = false, other_enabled = false;
    std::thread t([&] {
      other_enabled = GradMode::is_enabled();
      other_records = (x * 2.0).requires_grad();
    });
    t.join();
    CHECK(other_enabled);
    CHECK(other_records);
    {
      EnableGradGuard enable;
      CHECK((x * 2.0).requires_grad());
      {
        NoGradGuard nested;
        CHECK_FALSE((x * 2.0).requires_grad());
      }
      CHECK(GradMode::is_enabled());
    }
    CHECK_FALSE(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
  CHECK((x * 2.0).requires_grad());
  // A thread that turns grad off does not affect this one.
  std::thread t([&] {
    NoGradGuard no_grad;
    CHECK_FALSE((x * 2.0).requires_grad());
  });
  t.join();
  CHECK((x * 2.0).requires_grad());
  // backward can run on another thread.
  Tensor y = x * 3.0;
  std::thread b([&] { y.backward(ones({2}, kFloat64)); });
  b.join();
  CHECK(doubles(x.grad()) == std::vector<double>{3, 3});
}

TEST_CASE("register_hook on leaves and non-leaves, remove_hook", "[autograd]") {
  // Leaf: the hook's result is what gets accumulated.
  Tensor x = vec_leaf({1, 2});
  std::vector<double> seen;
  int64_t h = x.register_hook([&](const Tensor& g) {
    seen = doubles(g);
    return g * 2.0;
  });
  (x * 3.0).backward(ones({2}, kFloat64));
  CHECK(seen == std::vector<double>{3, 3});
  CHECK(doubles(x.grad()) == std::vector<double>{6, 6});
  x.remove_hook(h);
  x.mutable_grad() = Tensor();
  (x * 3.0).backward(ones({2}, kFloat64));
  CHECK(doubles(x.grad()) == std::vector<double>{3, 3});

  // Non-leaf: the hook changes the gradient flowing further back.
  Tensor w = vec_leaf({1, 2});
  Tensor y = w * 3.0;
  int calls = 0;
  int64_t hy = y.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 10.0;
  });
  // An observing hook returns an undefined tensor and changes nothing.
  y.register_hook([&](const Tensor& g) {
    seen = doubles(g);
    return Tensor();
  });
  (y * y).backward(ones({2}, kFloat64), /*retain_graph=*/true);
  CHECK(calls == 1);
  CHECK(seen == std::vector<double>{60, 120});  // hooks run in order: sees the x10 gradient
  CHECK(doubles(w.grad()) == std::vector<double>{180, 360});
  y.remove_hook(hy);
  w.mutable_grad() = Tensor();
  (y * y).backward(ones({2}, kFloat64));
  CHECK(calls == 1);
  CHECK(doubles(w.grad()) == std::vector<double>{18, 36});
}

TEST_CASE("a hook whose result has the wrong shape, dtype or device is an error", "[autograd]") {
  // Leaf: the (7,) result was accumulated into the (3,) parameter's .grad.
  Tensor x = vec_leaf({1, 2, 3});
  int64_t h = x.register_hook([](const Tensor&) { return zeros({7}, kFloat64); });
  require_throws_with<ShapeError>([&] { (x * 2.0).sum().backward(); },
                                  {"hook", "(7,)", "(3,)", "float64", "cpu", "leaf"});
  CHECK_FALSE(x.grad().defined());
  x.remove_hook(h);
  h = x.register_hook([](const Tensor& g) { return g.to(kFloat32); });
  require_throws_with<DTypeError>([&] { (x * 2.0).sum().backward(); }, {"hook", "float32", "float64", "(3,)"});
  CHECK_FALSE(x.grad().defined());
  // A hook's result may have other strides: only shape, dtype and device must match.
  x.remove_hook(h);
  x.register_hook([](const Tensor& g) { return g.expand({3}) * 1.0; });
  (x * 2.0).sum().backward();
  CHECK(doubles(x.grad()) == std::vector<double>{2, 2, 2});
  // A later wrong hook leaves the accumulated .grad as it was.
  x.register_hook([](const Tensor& g) { return g.reshape({3, 1}); });
  require_throws_with<ShapeError>([&] { (x * 2.0).sum().backward(); }, {"hook", "(3, 1)", "(3,)"});
  CHECK(doubles(x.grad()) == std::vector<double>{2, 2, 2});

  // Non-leaf: the error names the tensor's grad_fn; nothing reaches the leaf.
  Tensor w = vec_leaf({1, 2, 3});
  Tensor y = w * 3.0;
  int64_t hy = y.register_hook([](const Tensor&) { return zeros({2, 3}, kFloat64); });
  require_throws_with<ShapeError>([&] { (y * y).sum().backward(); },
                                  {"hook", "MulBackward", "(2, 3)", "(3,)"});
  CHECK_FALSE(w.grad().defined());
  y.remove_hook(hy);
  y.register_hook([](const Tensor& g) { return g.to(kInt64); });
  require_throws_with<DTypeError>([&] { (y * y).sum().backward(); }, {"hook", "MulBackward", "int64", "float64"});
  CHECK_FALSE(w.grad().defined());
  // loom::grad runs the same hooks and checks.
  require_throws_with<DTypeError>([&] { grad({(y * y).sum()}, {w}); }, {"hook", "int64"});
}

#ifndef LOOM_WITH_CUDA
TEST_CASE("a hook that moves the gradient to another device is an error", "[autograd][cuda_emulation]") {
  cuda::EmulationGuard emulate;
  Tensor x = vec_leaf({1, 2, 3});
  x.register_hook([](const Tensor& g) { return g.to(kCUDA); });
  require_throws_with<DeviceError>([&] { (x * 2.0).sum().backward(); }, {"hook", "cuda:0", "cpu", "(3,)"});
  CHECK_FALSE(x.grad().defined());
}
#endif

TEST_CASE("post-accumulate-grad hooks run once per backward", "[autograd]") {
  Tensor x = vec_leaf({1, 2});
  std::vector<std::vector<double>> grads;
  x.register_post_accumulate_grad_hook([&](const Tensor& t) { grads.push_back(doubles(t.grad())); });
  // x reaches the loss by three paths; the hook sees the summed gradient once.
  Tensor y = x * 2.0 + x * x + x.exp();
  y.backward(ones({2}, kFloat64));
  REQUIRE(grads.size() == 1);
  std::vector<double> first = {2 + 2 * 1 + std::exp(1.0), 2 + 2 * 2 + std::exp(2.0)};
  check_close(x.grad(), first, kFloat64);
  CHECK(grads[0] == doubles(x.grad()));
  (x * 1.0).backward(ones({2}, kFloat64));
  REQUIRE(grads.size() == 2);
  check_close(vec(grads[1]), {first[0] + 1, first[1] + 1}, kFloat64);  // accumulated
  // loom::grad does not accumulate, so no hook runs.
  grad({x * 2.0}, {x}, {ones({2}, kFloat64)});
  CHECK(grads.size() == 2);
}

TEST_CASE("retain_grad keeps the gradient of a non-leaf", "[autograd]") {
  Tensor x = vec_leaf({1, -2});
  Tensor y = x * 2.0;
  Tensor u = x * 5.0;  // not retained
  y.retain_grad();
  y.retain_grad();  // twice is harmless
  (y * y + u).backward(ones({2}, kFloat64), /*retain_graph=*/true);
  CHECK(doubles(y.grad()) == std::vector<double>{4, -8});  // 2y
  CHECK_FALSE(u.grad().defined());
  CHECK(doubles(x.grad()) == std::vector<double>{13, -11});
  (y * y + u).backward(ones({2}, kFloat64));
  CHECK(doubles(y.grad()) == std::vector<double>{8, -16});  // accumulates, as PyTorch
  x.retain_grad();  // a leaf keeps its grad anyway
  CHECK(x.grad().defined());
}

TEST_CASE("in-place changes to saved tensors are detected", "[autograd]") {
  Tensor x = leaf({3});
  Tensor w = leaf({3});
  Tensor a = x * 1.0;
  Tensor b = a * w;  // MulBackward saves a and w
  a.add_(1.0);
  require_throws_with<AutogradError>([&] { b.backward(ones({3}, kFloat64)); },
                                     {"MulBackward", "in-place", "version 1", "expected version 0", "(3,)"});
  // Through a view, under no_grad: the version counter is shared.
  Tensor c = x * 1.0;
  Tensor s = c.sigmoid();  // saves its output
  {
    NoGradGuard no_grad;
    s.view({3, 1}).mul_(2.0);
  }
  require_throws_with<AutogradError>([&] { s.backward(ones({3}, kFloat64)); }, {"SigmoidBackward", "version"});
  // A saved leaf changed under no_grad (an optimizer step between forward and backward).
  Tensor e = w.exp() * x;
  {
    NoGradGuard no_grad;
    x.sub_(0.1);
  }
  require_throws_with<AutogradError>([&] { e.backward(ones({3}, kFloat64)); }, {"MulBackward", "version"});
  // Modifying a tensor the backward does not read is fine (as PyTorch): add saves
  // nothing, x * c saves only c, masked_fill saves only the mask.
  Tensor f = x + w;
  Tensor k = w * 3.0;
  Tensor m = w.masked_fill(w > 0, 0.0);
  {
    NoGradGuard no_grad;
    x.mul_(2.0);
    w.add_(1.0);
  }
  f.backward(ones({3}, kFloat64));
  k.backward(ones({3}, kFloat64));
  m.backward(ones({3}, kFloat64));
  std::vector<double> wg = doubles(w.grad());
  std::vector<bool> pos = (w - 1.0 > 0).to_vector<bool>();
  for (size_t i = 0; i < 3; ++i) CHECK(wg[i] == 1 + 3 + (pos[i] ? 0 : 1));
}

TEST_CASE("anomaly mode names the backward that produced NaN or Inf", "[autograd]") {
  CHECK_FALSE(AnomalyMode::is_enabled());
  {
    Tensor x = zeros({2}, kFloat64).requires_grad_();
    Tensor y = x.sqrt();
    y.backward(ones({2}, kFloat64));  // without anomaly mode: inf, no error
    CHECK(std::isinf(doubles(x.grad())[0]));
  }
  {
    DetectAnomalyGuard anomaly;
    CHECK(AnomalyMode::is_enabled());
    Tensor x = zeros({2}, kFloat64).requires_grad_();
    require_throws_with<AutogradError>([&] { x.sqrt().backward(ones({2}, kFloat64)); },
                                       {"anomaly", "SqrtBackward", "Inf", "(2,)"});
    // log(0) * 0: MulBackward gets 0 * -inf = NaN.
    Tensor z = zeros({1}, kFloat64).requires_grad_();
    Tensor l = from_vector(std::vector<double>{0}).log();  // -inf, a constant
    require_throws_with<AutogradError>([&] { (z * l).backward(ones({1}, kFloat64)); },
                                       {"MulBackward", "Inf"});
    Tensor p = vec_leaf({0});
    require_throws_with<AutogradError>([&] { (p.log() * 0.0).backward(ones({1}, kFloat64)); },
                                       {"LogBackward", "NaN"});
    // Finite gradients pass.
    Tensor ok = vec_leaf({4});
    ok.sqrt().backward(ones({1}, kFloat64));
    CHECK(ok.grad().item<double>() == 0.25);
  }
  CHECK_FALSE(AnomalyMode::is_enabled());
}

TEST_CASE("loom::grad returns gradients without touching .grad", "[autograd]") {
  Tensor x = vec_leaf({1, 2});
  Tensor w = vec_leaf({3, 4});
  Tensor unused = vec_leaf({0});
  Tensor y = x * w + x;
  std::vector<Tensor> g = grad({y}, {x, w, unused}, {ones({2}, kFloat64)}, /*retain_graph=*/true);
  REQUIRE(g.size() == 3);
  CHECK(doubles(g[0]) == std::vector<double>{4, 5});
  CHECK(doubles(g[1]) == std::vector<double>{1, 2});
  CHECK_FALSE(g[2].defined());
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  // With respect to an intermediate.
  Tensor h = x * 3.0;
  Tensor z = h * h;
  std::vector<Tensor> gh = grad({z}, {h}, {vec({1, 1})});
  CHECK(doubles(gh[0]) == std::vector<double>{6, 12});
  // A scalar output needs no grad_outputs.
  Tensor s = scalar_tensor(2.0, kFloat64).requires_grad_();
  CHECK(grad({s * s}, {s})[0].item<double>() == 4.0);
  // Several outputs are summed.
  std::vector<Tensor> two = grad({x * 2.0, x * x}, {x}, {ones({2}, kFloat64), ones({2}, kFloat64)});
  CHECK(doubles(two[0]) == std::vector<double>{4, 6});
  require_throws_with<AutogradError>([&] { grad({y}, {ones({2})}, {ones({2}, kFloat64)}); },
                                     {"grad", "input 0", "require grad"});
  require_throws_with<ValueError>([&] { grad({y, y}, {x}, {ones({2}, kFloat64)}); }, {"2", "1"});
}

TEST_CASE("custom ops with record(), and gradcheck catching a wrong gradient", "[autograd]") {
  Tensor x = leaf({2, 3});
  Tensor y = right_square(x);
  CHECK(y.grad_fn()->name() == "RightSquareBackward");
  CHECK(gradcheck([](auto& in) { return right_square(in[0]); }, {leaf({2, 3})}));
  require_throws_with<AutogradError>([] { gradcheck([](auto& in) { return wrong_square(in[0]); }, {leaf({2, 3})}); },
                                     {"gradcheck", "Jacobian mismatch", "input 0", "(2, 3)"});
  // Also when the wrong op sits inside a larger graph, on a non-contiguous input.
  require_throws_with<AutogradError>(
      [] { gradcheck([](auto& in) { return wrong_square(in[0].t() * 2.0).exp(); }, {leaf({3, 2})}); },
      {"gradcheck", "mismatch"});
  // gradcheck's own argument checks.
  require_throws_with<DTypeError>([] { gradcheck([](auto& in) { return in[0] * 2.0; }, {ones({2}).requires_grad_()}); },
                                  {"gradcheck", "float64", "float32"});
  require_throws_with<ValueError>([] { gradcheck([](auto& in) { return in[0] * 2.0; }, {ones({2}, kFloat64)}); },
                                  {"gradcheck", "no input requires grad"});
  // A wrong gradient for only the second input is caught too.
  require_throws_with<AutogradError>([] {
    gradcheck([](auto& in) { return in[0] * wrong_square(in[1]); }, {leaf({2}), leaf({2})});
  }, {"input 1"});
}

TEST_CASE("a deep graph runs and is freed without recursion trouble", "[autograd]") {
  Tensor x = vec_leaf({1.0});
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y * 1.0;
  y.backward(ones({1}, kFloat64));
  CHECK(x.grad().item<double>() == 1.0);
  // Drop the last handle of a 50000-node chain on a thread with a 256 KiB stack: freeing
  // node by node through the shared_ptrs would need several MiB of stack.
  Tensor z = x;
  for (int i = 0; i < 50000; ++i) z = z * 1.0;
  struct Arg {
    Tensor t;
  } arg{std::move(z)};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attr, [](void* p) -> void* {
    static_cast<Arg*>(p)->t = Tensor();
    return nullptr;
  }, &arg) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  CHECK_FALSE(arg.t.defined());
}
