// Views: shapes, strides, offsets, shared storage and version counter, values against
// index arithmetic on the base, gradchecks, and the error paths; the copying ops
// (contiguous, clone, to, copy_).
#include "autograd/node.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

// 0, 1, 2, ... in float64, shaped.
Tensor iota(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(0, n, 1, kFloat64).reshape(shape);
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

// A float64 leaf requiring grad whose strides are not contiguous: the transpose of a
// random (cols, rows) tensor, so it has shape (rows, cols).
Tensor transposed_leaf(int64_t rows, int64_t cols) {
  Tensor t = random_nonzero({cols, rows}, kFloat64).t();
  REQUIRE_FALSE(t.is_contiguous());
  return t.requires_grad_(true);
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

}  // namespace

TEST_CASE("view: shapes, strides, shared storage and version", "[core]") {
  Tensor base = iota({2, 3, 4});
  Tensor v = base.view({6, 4});
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(v.strides() == Shape{4, 1});
  CHECK(shares_storage(v, base));
  CHECK(v.data() == base.data());
  CHECK(base.view({-1}).sizes() == Shape{24});
  CHECK(base.view({4, -1, 2}).sizes() == Shape{4, 3, 2});
  CHECK(base.view({1, 24, 1}).strides() == Shape{24, 1, 1});
  CHECK(scalar_tensor(3.0).view({1, 1}).sizes() == Shape{1, 1});
  CHECK(iota({1}).view({}).dim() == 0);
  CHECK(zeros({0, 4}).view({-1, 2}).sizes() == Shape{0, 2});

  // Writes through the view are seen by the base, and they share the version counter.
  const uint64_t version = base.version();
  v.select(0, 5).fill_(-1.0);
  CHECK(base.select(0, 1).select(0, 2).to_vector<double>() == std::vector<double>(4, -1.0));
  CHECK(base.version() == version + 1);
  base.mul_(2.0);
  CHECK(v.version() == version + 2);
  CHECK(v.to_vector<double>()[0 * 4 + 1] == 2.0);

  // A transposed tensor can still be viewed when the merged dims stay contiguous in memory.
  Tensor t = iota({3, 4}).t();  // (4, 3), strides (1, 4)
  Tensor t3 = t.view({4, 3, 1});
  CHECK(t3.strides()[0] == 1);
  CHECK(t3.strides()[1] == 4);
  CHECK(t3.to_vector<double>() == t.to_vector<double>());
  Tensor t4 = iota({2, 3, 4}).permute({1, 2, 0}).view({12, 2});  // merges (3, 4): contiguous
  CHECK(t4.strides() == Shape{1, 12});
  CHECK(t4.to_vector<double>() == iota({2, 3, 4}).permute({1, 2, 0}).contiguous().view({12, 2}).to_vector<double>());
}

TEST_CASE("view errors", "[core]") {
  Tensor t = iota({3, 4}).t();
  require_throws_with<ShapeError>([&] { t.view({12}); }, {"view", "(4, 3)", "(12,)", "reshape"});
  Tensor a = iota({2, 3});
  require_throws_with<ShapeError>([&] { a.view({-1, -1}); }, {"view", "-1", "(-1, -1)"});
  require_throws_with<ShapeError>([&] { a.view({4, -1}); }, {"view", "(4, -1)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { a.view({7}); }, {"view", "(7,)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { a.view({-2, 3}); }, {"view", "(-2, 3)"});
  require_throws_with<ShapeError>([&] { a.reshape({5, -1}); }, {"reshape", "(5, -1)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { zeros({0, 3}).view({0, -1}); }, {"view", "(0, -1)"});
}

TEST_CASE("reshape: a view when possible, else a copy", "[core]") {
  Tensor a = iota({2, 3, 4});
  Tensor r = a.reshape({4, 6});
  CHECK(shares_storage(r, a));
  Tensor t = a.transpose(0, 2);  // (4, 3, 2)
  Tensor c = t.reshape({-1});
  CHECK_FALSE(shares_storage(c, a));
  CHECK(c.is_contiguous());
  std::vector<double> expected;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) expected.push_back(i * 12 + j * 4 + k);
  CHECK(c.to_vector<double>() == expected);
  CHECK(t.reshape({4, 6}).to_vector<double>() == expected);
}

TEST_CASE("transpose, t and permute", "[core]") {
  Tensor a = iota({2, 3, 4});
  Tensor t = a.transpose(0, -1);
  CHECK(t.sizes() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK(shares_storage(t, a));
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.select(0, 3).select(0, 1).select(0, 1).item<double>() == 1 * 12 + 1 * 4 + 3);
  CHECK(a.transpose(1, 1).strides() == a.strides());

  Tensor m = iota({3, 5});
  Tensor mt = m.t();
  CHECK(mt.sizes() == Shape{5, 3});
  std::vector<double> v = mt.to_vector<double>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) CHECK(v[size_t(i * 3 + j)] == j * 5 + i);
  CHECK(iota({4}).t().sizes() == Shape{4});
  CHECK(scalar_tensor(1.0).transpose(0, -1).dim() == 0);

  Tensor p = a.permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(a.permute({-1, -3, -2}).strides() == p.strides());
  std::vector<double> pv = p.to_vector<double>();
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(pv[size_t(k * 6 + i * 3 + j)] == i * 12 + j * 4 + k);

  require_throws_with<IndexError>([&] { a.transpose(0, 3); }, {"transpose", "3"});
  require_throws_with<ShapeError>([&] { iota({2, 2, 2}).t(); }, {"t", "(2, 2, 2)"});
  require_throws_with<ShapeError>([&] { a.permute({0, 1}); }, {"permute", "(2, 3, 4)"});
  require_throws_with<ShapeError>([&] { a.permute({0, 1, 1}); }, {"permute", "repeats"});
  require_throws_with<IndexError>([&] { a.permute({0, 1, 5}); }, {"permute", "5"});
}

TEST_CASE("slice with steps, narrow, select", "[core]") {
  Tensor a = iota({5, 6});
  Tensor s = a.slice(1, 1, 6, 2);  // columns 1, 3, 5
  CHECK(s.sizes() == Shape{5, 3});
  CHECK(s.strides() == Shape{6, 2});
  CHECK(s.storage_offset() == 1);
  CHECK(shares_storage(s, a));
  std::vector<double> sv = s.to_vector<double>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) CHECK(sv[size_t(i * 3 + j)] == i * 6 + 1 + 2 * j);
  CHECK(a.slice(0, -2, std::nullopt).sizes() == Shape{2, 6});  // negative start
  CHECK(a.slice(0, std::nullopt, -1).sizes() == Shape{4, 6});   // negative end
  CHECK(a.slice(1, 2, 100).sizes() == Shape{5, 4});            // end clamped
  CHECK(a.slice(1, 7, 9).sizes() == Shape{5, 0});              // empty
  CHECK(a.slice(1, 4, 2).sizes() == Shape{5, 0});              // end before start
  CHECK(a.slice(0, 0, 5, 3).to_vector<double>() ==
        std::vector<double>{0, 1, 2, 3, 4, 5, 18, 19, 20, 21, 22, 23});  // rows 0 and 3
  CHECK(a.slice(1, 0, 6, 4).sizes() == Shape{5, 2});
  // Slicing a slice composes offsets and strides.
  Tensor ss = a.slice(1, 1, 6, 2).slice(0, 1, 5, 2).slice(1, 1, 3);
  CHECK(ss.to_vector<double>() == std::vector<double>{9, 11, 21, 23});

  Tensor n = a.narrow(0, 1, 3);
  CHECK(n.sizes() == Shape{3, 6});
  CHECK(n.storage_offset() == 6);
  CHECK(a.narrow(1, -2, 2).to_vector<double>()[0] == 4);

  Tensor r = a.select(0, -1);
  CHECK(r.sizes() == Shape{6});
  CHECK(r.to_vector<double>()[0] == 24);
  Tensor c = a.select(1, 2);
  CHECK(c.strides() == Shape{6});
  CHECK(c.to_vector<double>() == std::vector<double>{2, 8, 14, 20, 26});
  CHECK(a[2][3].item<double>() == 15);
  CHECK(a[2][3].dim() == 0);

  // Writes through slices and selects land in the base.
  a.slice(1, 0, 6, 3).fill_(-1.0);
  a.select(0, 4).zero_();
  std::vector<double> av = a.to_vector<double>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 6; ++j) {
      const double want = i == 4 ? 0.0 : j % 3 == 0 ? -1.0 : double(i * 6 + j);
      CHECK(av[size_t(i * 6 + j)] == want);
    }

  require_throws_with<ValueError>([&] { a.slice(0, 0, 2, 0); }, {"slice", "step", "0"});
  require_throws_with<ValueError>([&] { a.slice(0, 0, 2, -1); }, {"slice", "-1"});
  require_throws_with<IndexError>([&] { a.slice(2, 0, 1); }, {"slice", "2"});
  require_throws_with<ShapeError>([] { scalar_tensor(1.0).slice(0, 0, 1); }, {"slice", "0-dim"});
  require_throws_with<IndexError>([&] { a.narrow(0, 3, 3); }, {"narrow", "[3, 6)", "(5, 6)"});
  require_throws_with<IndexError>([&] { a.narrow(1, 0, -1); }, {"narrow", "(5, 6)"});
  require_throws_with<IndexError>([&] { a.select(0, 5); }, {"select", "5", "(5, 6)"});
  require_throws_with<IndexError>([&] { a.select(1, -7); }, {"select", "-7", "(5, 6)"});
  require_throws_with<IndexError>([&] { a.select(2, 0); }, {"select", "2"});
  require_throws_with<IndexError>([] { scalar_tensor(1.0).select(0, 0); }, {"select", "0-dim"});
}

TEST_CASE("squeeze, unsqueeze, expand, flatten", "[core]") {
  Tensor a = iota({1, 3, 1, 2});
  CHECK(a.squeeze().sizes() == Shape{3, 2});
  CHECK(a.squeeze(0).sizes() == Shape{3, 1, 2});
  CHECK(a.squeeze(-2).sizes() == Shape{1, 3, 2});
  CHECK(a.squeeze(1).sizes() == a.sizes());  // not size 1: unchanged
  CHECK(iota({1, 1}).squeeze().dim() == 0);
  CHECK(shares_storage(a.squeeze(), a));
  // squeeze of a non-contiguous tensor keeps its strides.
  Tensor nt = iota({3, 1, 4}).transpose(0, 2);  // (4, 1, 3)
  CHECK(nt.squeeze().strides() == Shape{1, 4});
  CHECK(nt.squeeze(1).strides() == Shape{1, 4});

  Tensor b = iota({3, 4});
  CHECK(b.unsqueeze(0).sizes() == Shape{1, 3, 4});
  CHECK(b.unsqueeze(1).sizes() == Shape{3, 1, 4});
  CHECK(b.unsqueeze(-1).sizes() == Shape{3, 4, 1});
  CHECK(b.unsqueeze(2).sizes() == Shape{3, 4, 1});
  CHECK(b.unsqueeze(-3).sizes() == Shape{1, 3, 4});
  CHECK(scalar_tensor(2.0).unsqueeze(0).sizes() == Shape{1});
  CHECK(b.t().unsqueeze(1).to_vector<double>() == b.t().to_vector<double>());
  require_throws_with<IndexError>([&] { b.unsqueeze(3); }, {"unsqueeze", "3"});
  require_throws_with<IndexError>([&] { b.unsqueeze(-4); }, {"unsqueeze", "-4"});

  Tensor c = iota({3, 1});
  Tensor e = c.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(shares_storage(e, c));
  std::vector<double> ev = e.to_vector<double>();
  for (size_t i = 0; i < ev.size(); ++i) CHECK(ev[i] == double(i / 4 % 3));
  CHECK(c.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK(c.expand({3, 1}).is_same(c));
  CHECK(c.expand_as(zeros({3, 2})).sizes() == Shape{3, 2});
  require_throws_with<ShapeError>([&] { c.expand({2, 4}); }, {"expand", "(3, 1)", "(2, 4)"});
  require_throws_with<ShapeError>([&] { c.expand({3}); }, {"expand", "(3,)", "(3, 1)"});
  require_throws_with<ShapeError>([&] { c.expand({-1, 3, 1}); }, {"expand", "-1"});

  Tensor f = iota({2, 3, 4});
  CHECK(f.flatten().sizes() == Shape{24});
  CHECK(f.flatten(1).sizes() == Shape{2, 12});
  CHECK(f.flatten(0, 1).sizes() == Shape{6, 4});
  CHECK(f.flatten(-2, -1).sizes() == Shape{2, 12});
  CHECK(f.flatten(1, 1).sizes() == f.sizes());
  CHECK(scalar_tensor(1.0).flatten().sizes() == Shape{1});
  CHECK(f.transpose(0, 1).flatten().to_vector<double>() == f.transpose(0, 1).contiguous().view({24}).to_vector<double>());
  require_throws_with<ValueError>([&] { f.flatten(2, 1); }, {"flatten", "2", "1"});
  require_throws_with<IndexError>([&] { f.flatten(0, 3); }, {"flatten", "3"});
}

TEST_CASE("split, chunk, unbind", "[core]") {
  Tensor a = iota({7, 2});
  std::vector<Tensor> s = a.split(3);
  REQUIRE(s.size() == 3);
  CHECK(s[0].sizes() == Shape{3, 2});
  CHECK(s[2].sizes() == Shape{1, 2});
  CHECK(s[2].to_vector<double>() == std::vector<double>{12, 13});
  CHECK(shares_storage(s[1], a));
  std::vector<Tensor> s2 = a.split(Dims{2, 5});
  REQUIRE(s2.size() == 2);
  CHECK(s2[1].sizes() == Shape{5, 2});
  CHECK(s2[1].to_vector<double>()[0] == 4);
  std::vector<Tensor> s3 = a.split(1, 1);
  REQUIRE(s3.size() == 2);
  CHECK(s3[1].to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11, 13});
  CHECK(a.split(10).size() == 1);

  std::vector<Tensor> c = a.chunk(3);  // as torch.chunk: sizes 3, 3, 1
  REQUIRE(c.size() == 3);
  CHECK(c[0].size(0) == 3);
  CHECK(c[2].size(0) == 1);
  CHECK(iota({6}).chunk(4).size() == 3);  // sizes 2, 2, 2
  CHECK(iota({2, 6}).chunk(2, -1)[1].sizes() == Shape{2, 3});

  std::vector<Tensor> u = a.unbind(1);
  REQUIRE(u.size() == 2);
  CHECK(u[0].sizes() == Shape{7});
  CHECK(u[0].to_vector<double>() == std::vector<double>{0, 2, 4, 6, 8, 10, 12});
  CHECK(a.unbind().size() == 7);

  require_throws_with<ValueError>([&] { a.split(0); }, {"split", "0"});
  require_throws_with<ShapeError>([&] { a.split(Dims{2, 4}); }, {"split", "(2, 4)", "(7, 2)"});
  require_throws_with<ValueError>([&] { a.chunk(0); }, {"chunk", "0"});
  require_throws_with<IndexError>([&] { a.unbind(2); }, {"unbind", "2"});
}

TEST_CASE("views share the version counter with their base", "[core]") {
  Tensor a = iota({4, 4});
  std::vector<Tensor> views = {a.view({16}), a.t(), a.slice(0, 1, 3), a.select(1, 0), a.unsqueeze(0),
                               a.expand({2, 4, 4}), a.detach(), a.permute({1, 0}), a.narrow(1, 1, 2)};
  for (Tensor& v : views) {
    const uint64_t before = v.version();
    a.add_(1.0);
    CHECK(v.version() == before + 1);
  }
  const uint64_t before = a.version();
  a.t().mul_(3.0);
  a.select(0, 1).fill_(0.0);
  CHECK(a.version() == before + 2);
  // A copy has its own counter.
  Tensor c = a.clone();
  a.add_(1.0);
  CHECK(c.version() == 0);
}

TEST_CASE("views record history and gradcheck", "[core]") {
  Tensor x = leaf({2, 3, 4});
  CHECK(x.view({6, 4}).grad_fn()->name() == "ViewBackward");
  CHECK(x.transpose(0, 1).grad_fn()->name() == "TransposeBackward");
  CHECK(x.slice(1, 0, 2).grad_fn()->name() == "SliceBackward");
  CHECK(x.select(0, 1).grad_fn()->name() == "SelectBackward");
  CHECK(x.permute({2, 0, 1}).grad_fn()->name() == "PermuteBackward");
  CHECK(x.unsqueeze(0).grad_fn()->name() == "UnsqueezeBackward");
  CHECK(x.slice(0, 0, 1).expand({3, 3, 4}).grad_fn()->name() == "ExpandBackward");
  CHECK(x.detach().grad_fn() == nullptr);

  const std::vector<std::pair<const char*, Fn>> ops = {
      {"view", [](auto& in) { return in[0].view({4, -1}); }},
      {"reshape", [](auto& in) { return in[0].reshape({3, 4}); }},
      {"transpose", [](auto& in) { return in[0].transpose(0, 1); }},
      {"t", [](auto& in) { return in[0].t(); }},
      {"permute", [](auto& in) { return in[0].unsqueeze(0).permute({2, 0, 1}); }},
      {"slice step", [](auto& in) { return in[0].slice(1, 0, 4, 3); }},
      {"slice neg", [](auto& in) { return in[0].slice(0, -2, std::nullopt); }},
      {"narrow", [](auto& in) { return in[0].narrow(1, 1, 2); }},
      {"select", [](auto& in) { return in[0].select(1, -1); }},
      {"squeeze", [](auto& in) { return in[0].unsqueeze(1).squeeze(); }},
      {"squeeze dim", [](auto& in) { return in[0].unsqueeze(2).squeeze(2); }},
      {"unsqueeze", [](auto& in) { return in[0].unsqueeze(-1); }},
      {"expand", [](auto& in) { return in[0].unsqueeze(0).expand({2, -1, -1}); }},
      {"expand size 1", [](auto& in) { return in[0].slice(1, 0, 1).expand({3, 5}); }},
      {"flatten", [](auto& in) { return in[0].unsqueeze(0).flatten(1); }},
      {"split", [](auto& in) { return in[0].split(2, 1)[1] * 3.0; }},
      {"split sizes", [](auto& in) { return in[0].split(Dims{1, 3}, 1)[1]; }},
      {"chunk", [](auto& in) { auto c = in[0].chunk(2, 1); return c[0] * c[1]; }},
      {"unbind", [](auto& in) { auto u = in[0].unbind(0); return u[0] * u[2]; }},
      {"contiguous", [](auto& in) { return in[0].contiguous(); }},
      {"clone", [](auto& in) { return in[0].clone(); }},
      {"chain", [](auto& in) { return in[0].t().slice(0, 1, 4, 2).unsqueeze(1).expand({2, 2, 3}); }},
  };
  for (const auto& [name, f] : ops) {
    INFO(name);
    CHECK(gradcheck(f, {leaf({3, 4})}));
    if (std::string(name) != "view") CHECK(gradcheck(f, {transposed_leaf(3, 4)}));  // non-contiguous
  }
}

TEST_CASE("contiguous, clone, to", "[core]") {
  Tensor a = iota({3, 4});
  CHECK(a.contiguous().is_same(a));
  Tensor t = a.t();
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(shares_storage(c, a));
  CHECK(c.to_vector<double>() == t.to_vector<double>());
  Tensor k = a.clone();
  CHECK_FALSE(shares_storage(k, a));
  k.fill_(0.0);
  CHECK(a.to_vector<double>()[5] == 5.0);
  CHECK(t.clone().sizes() == Shape{4, 3});

  // to(dtype) is differentiable back into the source dtype.
  Tensor x = leaf({2, 3});
  Tensor y = x.to(kFloat32);
  CHECK(y.grad_fn()->name() == "ToCopyBackward");
  (y * 2.0).backward(ones({2, 3}));
  CHECK(x.grad().dtype() == kFloat64);
  CHECK(x.grad().to_vector<double>() == std::vector<double>(6, 2.0));
  CHECK_FALSE(x.to(kInt64).requires_grad());  // integer results have no gradient
}

TEST_CASE("copy_: broadcasting, casting, autograd, errors", "[core]") {
  Tensor dst = zeros({2, 3}, kFloat64);
  dst.copy_(tensor({1.f, 2.f, 3.f}));  // broadcast (3,) -> (2, 3), cast float32 -> float64
  CHECK(dst.to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});
  Tensor it = zeros({3, 2}, kInt32);
  it.t().copy_(from_vector(std::vector<double>{1.9, -2.9, 3, 4, 5, 6}, {2, 3}));  // through a view
  CHECK(it.to_vector<int32_t>() == std::vector<int32_t>{1, 4, -2, 5, 3, 6});
  const uint64_t v = dst.version();
  dst.copy_(ones({1}, kFloat64));
  CHECK(dst.version() == v + 1);

  CHECK(gradcheck([](auto& in) {
    Tensor out = zeros({2, 3}, kFloat64);
    out.copy_(in[0]);
    return out * in[1];
  }, {leaf({3}), leaf({2, 3})}));
  // Copying over a tensor with history cuts the old history off.
  CHECK(gradcheck([](auto& in) {
    Tensor out = in[1] * 2.0;
    out.copy_(in[0].t());
    return out;
  }, {leaf({3, 2}), leaf({2, 3})}));

  require_throws_with<ShapeError>([&] { dst.copy_(zeros({4})); }, {"copy_", "(4,)", "(2, 3)"});
  Tensor l = leaf({2});
  require_throws_with<AutogradError>([&] { l.copy_(zeros({2})); }, {"copy_", "leaf", "(2,)"});
}

TEST_CASE("in-place ops on views of tensors with history are rejected", "[core]") {
  // Loom does not rebase the history of a base through a view (PyTorch's CopySlices).
  Tensor x = leaf({2, 3});
  Tensor y = x * 1.0;
  const std::vector<double> before = y.to_vector<double>();
  require_throws_with<NotImplementedError>([&] { y.select(0, 0).mul_(x.select(0, 1)); },
                                           {"mul", "views"});
  require_throws_with<NotImplementedError>([&] { y.select(0, 0).add_(1.0); }, {"add", "views"});
  require_throws_with<NotImplementedError>([&] { y.select(0, 0).fill_(1.0); }, {"fill_", "views"});
  require_throws_with<NotImplementedError>([&] { y.select(0, 0).copy_(x[1]); }, {"copy_", "views"});
  require_throws_with<NotImplementedError>([&] { y.select(0, 0).clamp_(0.0, 1.0); }, {"clamp_", "views"});
  require_throws_with<NotImplementedError>([&] { y.select(0, 0).masked_fill_(tensor({true, false, true}), 0.0); },
                                           {"masked_fill_", "views"});
  CHECK(y.to_vector<double>() == before);  // a rejected op writes nothing
  // Without grad mode the same write is fine.
  NoGradGuard no_grad;
  y.select(0, 0).mul_(2.0);
  CHECK(y.to_vector<double>()[0] == 2 * x.to_vector<double>()[0]);
}
