// nn::Module and the non-recurrent layers: the Module API (registration, dotted names,
// buffers, children, train/eval, to(dtype) keeping handles valid, zero_grad, state_dict and
// load_state_dict, printing as PyTorch's print(model)); Linear, Embedding, LayerNorm and
// GELU against PyTorch (tests/golden/make_nn_golden.py: outputs and the gradients of
// inputs and parameters), every layer against plain loops in double for every float
// dtype, float64 gradcheck, default initialisation statistics, Dropout, Sequential, the
// TextClassifier of docs/nn.md, and the error paths.
#include <cmath>
#include <numbers>
#include <set>
#include <sstream>

#include "cuda_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const SafetensorsFile& golden() {
  return golden_file("nn_layers");
}

Tensor fixture(const std::string& name) {
  auto it = golden().tensors.find(name);
  INFO("fixture " << name);
  REQUIRE(it != golden().tensors.end());
  return it->second;
}

std::string golden_text(const std::string& key) {
  auto it = golden().metadata.find(key);
  INFO("fixture metadata " << key);
  REQUIRE(it != golden().metadata.end());
  return it->second;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

std::vector<std::string> names_of(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// The model of the issue and of docs/nn.md, exactly as written there.
struct TextClassifier : nn::Module {
  TextClassifier(int vocab, int dim, int classes)
      : embedding(register_module("embedding", nn::Embedding(vocab, dim))),
        fc(register_module("fc", nn::Linear(dim, classes))) {}
  Tensor forward(const Tensor& x) { return fc(embedding(x).mean(1)); }
  nn::Embedding embedding;
  nn::Linear fc;
};

// The models whose print(model) and state_dict keys the fixture holds (make_nn_golden.py).
struct Net : nn::Module {
  Net()
      : embed(register_module("embed", nn::Embedding(nn::EmbeddingOptions(50, 8).padding_idx(0)))),
        encoder(register_module("encoder", nn::Sequential(nn::Linear(8, 16), nn::GELU("tanh"), nn::Dropout(0.1),
                                                          nn::Linear(16, 8), nn::ReLU(), nn::GELU()))),
        norm(register_module("norm", nn::LayerNorm(8))),
        norm2d(register_module("norm2d",
                               nn::LayerNorm(nn::LayerNormOptions({2, 4}).eps(1e-6).elementwise_affine(false)))),
        head(register_module("head", nn::Sequential(nn::Tanh(), nn::Sigmoid(),
                                                    nn::Linear(nn::LinearOptions(8, 3).bias(false))))) {}
  nn::Embedding embed;
  nn::Sequential encoder;
  nn::LayerNorm norm, norm2d;
  nn::Sequential head;
};

struct Block : nn::Module {
  Block() : fc(register_module("fc", nn::Linear(2, 2))), act(register_module("act", nn::Tanh())) {}
  std::string extra_repr() const override { return "scale=2"; }
  nn::Linear fc;
  nn::Tanh act;
};

// Own parameters and buffers (an int buffer among them) and children two levels deep.
struct Inner : nn::Module {
  Inner() {
    w = register_parameter("w", ones({2}));
    count = register_buffer("count", zeros({1}, kInt64));
    stats = register_buffer("stats", full({2}, 0.5));
    fc = register_module("fc", nn::Linear(2, 2));
  }
  Tensor w, count, stats;
  nn::Linear fc{nullptr};
};

struct Outer : nn::Module {
  Outer() {
    scale = register_parameter("scale", full({1}, 2.0));
    inner = register_module("inner", std::make_shared<Inner>());
    seq = register_module("seq", nn::Sequential(nn::Linear(2, 3), nn::ReLU(), nn::Dropout(0.5)));
  }
  Tensor scale;
  std::shared_ptr<Inner> inner;
  nn::Sequential seq{nullptr};
};

}  // namespace

// ---- the Module API ---------------------------------------------------------------------------
TEST_CASE("nn::Module lists parameters, buffers and children with dotted names", "[nn]") {
  auto m = std::make_shared<Outer>();
  const std::vector<std::string> params{"scale", "inner.w", "inner.fc.weight", "inner.fc.bias", "seq.0.weight",
                                        "seq.0.bias"};
  CHECK(names_of(m->named_parameters()) == params);
  CHECK(names_of(m->named_parameters(/*recurse=*/false)) == std::vector<std::string>{"scale"});
  CHECK(names_of(m->named_buffers()) == std::vector<std::string>{"inner.count", "inner.stats"});
  CHECK(m->named_buffers(false).empty());
  CHECK(names_of(m->inner->named_buffers(false)) == std::vector<std::string>{"count", "stats"});

  // parameters() are the same tensors as the members, in the same order.
  const std::vector<Tensor> ps = m->parameters();
  REQUIRE(ps.size() == 6);
  CHECK(ps[0].is_same(m->scale));
  CHECK(ps[1].is_same(m->inner->w));
  CHECK(ps[2].is_same(m->inner->fc->weight));
  CHECK(ps[5].is_same(m->seq->named_parameters()[1].second));
  for (const Tensor& p : ps) CHECK((p.requires_grad() && p.is_leaf()));
  REQUIRE(m->buffers().size() == 2);
  CHECK(m->buffers()[0].is_same(m->inner->count));
  CHECK_FALSE(m->inner->count.requires_grad());

  auto children = m->named_children();
  REQUIRE(children.size() == 2);
  CHECK(children[0].first == "inner");
  CHECK(children[0].second == m->inner);
  CHECK(children[1].first == "seq");
  CHECK(m->children()[1] == m->seq.ptr());

  std::vector<std::string> modules;
  for (auto& [name, module] : m->named_modules()) modules.push_back(name + ":" + module->type_name());
  CHECK(modules == std::vector<std::string>{":Outer", "inner:Inner", "inner.fc:Linear", "seq:Sequential",
                                            "seq.0:Linear", "seq.1:ReLU", "seq.2:Dropout"});

  // state_dict: parameters and buffers, detached, sharing memory with the module.
  nn::StateDict sd = m->state_dict();
  std::set<std::string> keys;
  for (auto& [k, v] : sd) keys.insert(k);
  std::set<std::string> expected(params.begin(), params.end());
  expected.insert({"inner.count", "inner.stats"});
  CHECK(keys == expected);
  CHECK_FALSE(sd["scale"].requires_grad());
  CHECK(sd["scale"].data() == m->scale.data());
  CHECK(sd["inner.count"].dtype() == kInt64);
}

TEST_CASE("nn::Module lists a tied parameter or shared module once, under its first name", "[nn]") {
  struct Tied : nn::Module {
    Tied() {
      emb = register_module("emb", nn::Embedding(10, 4));
      shared = register_module("shared", nn::Linear(4, 4));
      register_module("again", shared);                // the same Linear under a second name
      register_parameter("decoder_weight", emb->weight);  // weight tying
    }
    nn::Embedding emb{nullptr};
    nn::Linear shared{nullptr};
  };
  auto m = std::make_shared<Tied>();
  CHECK(names_of(m->named_parameters()) == std::vector<std::string>{"decoder_weight", "shared.weight", "shared.bias"});
  CHECK(m->parameters().size() == 3);
  CHECK(m->parameters()[0].is_same(m->emb->weight));
  std::vector<std::string> modules;
  for (auto& [name, module] : m->named_modules()) modules.push_back(name);
  CHECK(modules == std::vector<std::string>{"", "emb", "shared"});
  // state_dict keeps every name, as PyTorch's, and loads back.
  nn::StateDict sd = m->state_dict();
  CHECK(sd.size() == 6);
  CHECK(sd.count("again.weight") == 1);
  CHECK(sd.count("decoder_weight") == 1);
  CHECK_NOTHROW(m->load_state_dict(sd));
}

TEST_CASE("nn::Module rejects bad and repeated names", "[nn]") {
  auto m = std::make_shared<Outer>();
  require_throws_with<ValueError>([&] { m->register_parameter("scale", ones({1})); },
                                  {"Outer", "register_parameter", "'scale'", "already registered"});
  require_throws_with<ValueError>([&] { m->register_buffer("inner", ones({1})); },
                                  {"Outer", "register_buffer", "'inner'", "already registered"});
  require_throws_with<ValueError>([&] { m->register_module("scale", nn::ReLU()); },
                                  {"Outer", "register_module", "'scale'", "already registered"});
  require_throws_with<ValueError>([&] { m->register_parameter("a.b", ones({1})); },
                                  {"Outer", "register_parameter", "'a.b'"});
  require_throws_with<ValueError>([&] { m->register_buffer("", ones({1})); }, {"Outer", "register_buffer", "''"});
  require_throws_with<ValueError>([&] { m->register_module("empty", nn::Linear(nullptr)); },
                                  {"Outer", "register_module", "'empty'", "empty"});
  require_throws_with<ValueError>([&] { m->register_parameter("undefined", Tensor()); },
                                  {"Outer", "register_parameter", "'undefined'", "undefined"});
  // An empty handle throws when used, and says how to fix it.
  nn::Linear empty(nullptr);
  CHECK(empty.is_empty());
  require_throws_with<ValueError>([&] { empty(ones({2, 2})); }, {"empty", "assign"});
  require_throws_with<ValueError>([&] { (void)empty->weight; }, {"empty"});
  // named_modules hands out shared pointers: a module on the stack cannot give one.
  Block on_stack;
  require_throws_with<ValueError>([&] { on_stack.named_modules(); }, {"Block", "named_modules", "shared_ptr"});
}

TEST_CASE("nn::Module: train and eval reach every submodule", "[nn]") {
  auto m = std::make_shared<Outer>();
  for (auto& [name, sub] : m->named_modules()) CHECK(sub->is_training());
  m->eval();
  for (auto& [name, sub] : m->named_modules()) CHECK_FALSE(sub->is_training());
  // In eval mode the Dropout inside seq is the identity.
  const Tensor x = randn({4, 2});
  const nn::NamedTensors ps = m->seq->named_parameters();
  check_close(m->seq(x), nn::functional::linear(x, ps[0].second, ps[1].second).relu());
  m->inner->train();
  CHECK(m->inner->fc->is_training());
  CHECK_FALSE(m->is_training());
  m->train(true);
  for (auto& [name, sub] : m->named_modules()) CHECK(sub->is_training());
}

TEST_CASE("nn::Module::to(dtype) casts floating parameters and buffers in place", "[nn]") {
  auto m = std::make_shared<Outer>();
  Tensor w = m->inner->fc->weight;  // a handle kept across the cast (as an optimizer keeps them)
  const std::vector<double> before = values(w);
  m->inner->fc(ones({1, 2})).sum().backward();
  REQUIRE(w.grad().defined());
  const std::vector<double> grad_before = values(w.grad());

  m->to(kFloat64);
  for (const Tensor& p : m->parameters()) CHECK(p.dtype() == kFloat64);
  CHECK(w.dtype() == kFloat64);
  CHECK(w.is_same(m->inner->fc->weight));
  CHECK(w.is_same(m->parameters()[2]));
  CHECK((w.requires_grad() && w.is_leaf()));
  CHECK(values(w) == before);
  CHECK(w.grad().dtype() == kFloat64);
  CHECK(values(w.grad()) == grad_before);
  CHECK(m->inner->stats.dtype() == kFloat64);
  CHECK(m->inner->count.dtype() == kInt64);  // integer buffers keep their dtype
  // The model runs in float64, and gradients flow to the same handles.
  Tensor y = m->seq(randn({3, 2}, kFloat64));
  CHECK(y.dtype() == kFloat64);
  m->inner->fc(ones({1, 2}, kFloat64)).sum().backward();
  CHECK(w.grad().dtype() == kFloat64);

  m->to(kCPU);  // already there: nothing changes
  CHECK(w.is_same(m->inner->fc->weight));
  m->to(kCPU, kFloat32);
  CHECK(w.dtype() == kFloat32);
  CHECK(values(w) == before);  // float32 -> float64 -> float32 is exact
}

TEST_CASE("nn::Module::zero_grad drops or zeroes every gradient", "[nn]") {
  auto m = std::make_shared<Outer>();
  auto backward = [&] { (m->seq(m->inner->fc(ones({2, 2}))).sum() * m->scale).sum().backward(); };
  backward();
  for (const Tensor& p : m->parameters()) {
    if (p.is_same(m->inner->w)) CHECK_FALSE(p.grad().defined());  // not used
    else CHECK(p.grad().defined());
  }
  m->zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : m->parameters()) {
    if (!p.grad().defined()) continue;
    CHECK(p.grad().sizes() == p.sizes());
    CHECK(p.grad().abs().sum().item<double>() == 0.0);
  }
  backward();
  m->zero_grad();  // set_to_none, PyTorch's default
  for (const Tensor& p : m->parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("nn::Module::load_state_dict copies values and reports every problem at once", "[nn]") {
  auto a = std::make_shared<TextClassifier>(20, 6, 3), b = std::make_shared<TextClassifier>(20, 6, 3);
  b->load_state_dict(a->state_dict());
  for (auto& [name, t] : a->state_dict()) {
    INFO(name);
    CHECK(values(b->state_dict()[name]) == values(t));
    CHECK(b->state_dict()[name].data() != t.data());  // copied, not shared
  }
  CHECK(b->fc->weight.requires_grad());

  // Missing, unexpected and mis-shaped keys, all in one ValueError; nothing is changed.
  nn::StateDict bad = a->state_dict();
  bad.erase("fc.bias");
  bad["fc.scale"] = ones({1});
  bad["embedding.weight"] = zeros({10, 6});
  bad["fc.weight"] = zeros({3, 6});
  const std::vector<double> weight_before = values(b->fc->weight);
  require_throws_with<ValueError>([&] { b->load_state_dict(bad); },
                                  {"TextClassifier", "load_state_dict", "missing keys: fc.bias",
                                   "unexpected keys: fc.scale", "embedding.weight", "(10, 6)", "(20, 6)"});
  CHECK(values(b->fc->weight) == weight_before);

  // strict = false ignores missing and unexpected keys, never a shape mismatch.
  bad.erase("embedding.weight");
  b->load_state_dict(bad, /*strict=*/false);
  CHECK(b->fc->weight.abs().sum().item<double>() == 0.0);
  bad["embedding.weight"] = zeros({20, 5});
  require_throws_with<ValueError>([&] { b->load_state_dict(bad, false); },
                                  {"TextClassifier", "load_state_dict", "embedding.weight", "(20, 5)", "(20, 6)"});

  // Values of another dtype are converted into the module's.
  nn::StateDict f64;
  for (auto& [name, t] : a->state_dict()) f64[name] = t.to(kFloat64) * 2.0;
  b->load_state_dict(f64);
  CHECK(b->fc->bias.dtype() == kFloat32);
  check_close(b->fc->bias, a->fc->bias * 2.0);
}

TEST_CASE("nn::Module prints the module tree as PyTorch's print(model)", "[nn]") {
  CHECK(TextClassifier(20, 6, 3).str() == golden_text("print.textclf"));
  CHECK(Net().str() == golden_text("print.net"));
  CHECK(Block().str() == golden_text("print.block"));
  nn::Sequential mlp(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  std::ostringstream os;
  os << mlp;
  // operator<< ends with the parameter counts (4*8 + 8 + 8*2 + 2).
  CHECK(os.str() == golden_text("print.mlp") + "\nParameters: 58 total, 58 trainable");
  // The losses print without options, as PyTorch's.
  CHECK(nn::CrossEntropyLoss()->str() == "CrossEntropyLoss()");
  CHECK(nn::MSELoss("sum")->str() == "MSELoss()");
  CHECK(nn::SmoothL1Loss(nn::SmoothL1LossOptions().beta(0.5))->str() == "SmoothL1Loss()");
}

TEST_CASE("nn::Module: parameter names and order match PyTorch's state_dict keys", "[nn]") {
  CHECK(names_of(TextClassifier(20, 6, 3).named_parameters()) == split(golden_text("keys.textclf"), ','));
  CHECK(names_of(Net().named_parameters()) == split(golden_text("keys.net"), ','));
  CHECK(names_of(Block().named_parameters()) == split(golden_text("keys.block"), ','));
  nn::Sequential mlp(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  CHECK(names_of(mlp->named_parameters()) == split(golden_text("keys.mlp"), ','));
}

// ---- the layers against PyTorch ---------------------------------------------------------------
TEST_CASE("Linear matches PyTorch: output and the gradients of input, weight and bias", "[nn]") {
  for (const char* bias : {"bias", "nobias"}) {
    for (const char* dims : {"2d", "3d"}) {
      const std::string c = std::string("linear_") + bias + "_" + dims;
      INFO(c);
      const bool has_bias = std::string(bias) == "bias";
      nn::Linear lin(nn::LinearOptions(4, 5).bias(has_bias));
      nn::StateDict sd{{"weight", fixture(c + ".weight")}};
      if (has_bias) sd["bias"] = fixture(c + ".bias");
      lin->load_state_dict(sd);
      Tensor x = fixture(c + ".x").clone().requires_grad_(true);
      Tensor y = lin(x);
      y.backward(fixture(c + ".gy"));
      check_close(y, fixture(c + ".out"), "out");
      check_close(x.grad(), fixture(c + ".grad_x"), "grad x");
      check_close(lin->weight.grad(), fixture(c + ".grad_weight"), "grad weight");
      if (has_bias) check_close(lin->bias.grad(), fixture(c + ".grad_bias"), "grad bias");
      CHECK(lin->bias.defined() == has_bias);
      CHECK(lin->parameters().size() == (has_bias ? 2u : 1u));
    }
  }
}

TEST_CASE("Embedding matches PyTorch, with and without padding_idx", "[nn]") {
  for (auto [name, pad] : std::vector<std::pair<std::string, int64_t>>{{"nopad", 0}, {"pad0", 0}, {"pad3", 3}, {"padm1", -1}}) {
    const std::string c = "embedding_" + name;
    INFO(c);
    nn::EmbeddingOptions o(10, 4);
    if (name != "nopad") o.padding_idx(pad);
    nn::Embedding emb(o);
    if (name == "padm1") CHECK(*emb->options.padding_idx_ == 9);  // counted from the end
    if (name != "nopad") CHECK(emb->weight[*emb->options.padding_idx_].abs().sum().item<double>() == 0.0);
    emb->load_state_dict({{"weight", fixture(c + ".weight")}});
    Tensor y = emb(fixture(c + ".indices"));
    y.backward(fixture(c + ".gy"));
    check_close(y, fixture(c + ".out"), "out");
    check_close(emb->weight.grad(), fixture(c + ".grad_weight"), "grad weight");
  }
}

TEST_CASE("LayerNorm matches PyTorch over 1-D and 2-D normalized shapes", "[nn]") {
  for (const char* dims : {"1d", "2d"}) {
    for (bool affine : {true, false}) {
      const std::string c = std::string("layer_norm_") + dims + (affine ? "_affine" : "_plain");
      INFO(c);
      const Shape shape = std::string(dims) == "1d" ? Shape{8} : Shape{2, 4};
      nn::LayerNorm ln(nn::LayerNormOptions(shape).elementwise_affine(affine));
      CHECK(ln->parameters().size() == (affine ? 2u : 0u));
      if (affine) ln->load_state_dict({{"weight", fixture(c + ".weight")}, {"bias", fixture(c + ".bias")}});
      Tensor x = fixture(c + ".x").clone().requires_grad_(true);
      Tensor y = ln(x);
      y.backward(fixture(c + ".gy"));
      check_close(y, fixture(c + ".out"), "out");
      check_close(x.grad(), fixture(c + ".grad_x"), "grad x");
      if (affine) {
        check_close(ln->weight.grad(), fixture(c + ".grad_weight"), "grad weight");
        check_close(ln->bias.grad(), fixture(c + ".grad_bias"), "grad bias");
      }
    }
  }
}

TEST_CASE("LayerNorm without a bias: only the weight, and the affine result without a shift", "[nn]") {
  nn::LayerNorm with_bias(8), without(nn::LayerNormOptions({8}).bias(false));
  REQUIRE(without->parameters().size() == 1u);
  CHECK(without->named_parameters().front().first == "weight");
  CHECK_FALSE(without->bias.defined());
  CHECK(without->str().find("bias=False") != std::string::npos);
  {
    NoGradGuard no_grad;
    with_bias->weight.copy_(random_nonzero({8}));
    with_bias->bias.copy_(random_nonzero({8}));
    without->weight.copy_(with_bias->weight);
  }
  const Tensor x = random_nonzero({3, 8});
  check_close(without(x), with_bias(x) - with_bias->bias, "bias-free layer norm");
}

TEST_CASE("GELU matches PyTorch in both forms", "[nn]") {
  for (const char* approximate : {"none", "tanh"}) {
    const std::string c = std::string("gelu_") + approximate;
    INFO(c);
    nn::GELU gelu(approximate);
    Tensor x = fixture(c + ".x").clone().requires_grad_(true);
    Tensor y = gelu(x);
    y.backward(fixture(c + ".gy"));
    check_close(y, fixture(c + ".out"), "out");
    check_close(x.grad(), fixture(c + ".grad_x"), "grad x");
  }
}

TEST_CASE("TextClassifier matches PyTorch's loss and gradients, and trains", "[nn]") {
  auto model = std::make_shared<TextClassifier>(20, 6, 3);
  nn::StateDict sd;
  for (const std::string& key : split(golden_text("keys.textclf"), ',')) sd[key] = fixture("textclf.param." + key);
  model->load_state_dict(sd);
  const Tensor indices = fixture("textclf.indices"), target = fixture("textclf.target");
  Tensor loss = nn::functional::cross_entropy(model->forward(indices), target);
  check_close(loss, fixture("textclf.loss"), "loss");
  loss.backward();
  for (auto& [name, p] : model->named_parameters()) check_close(p.grad(), fixture("textclf.grad.param." + name), name);

  // A few SGD steps on the same batch drive the loss down.
  optim::SGD optimizer(model->parameters(), /*lr=*/0.5);
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    Tensor l = nn::functional::cross_entropy(model->forward(indices), target);
    l.backward();
    optimizer.step();
    losses.push_back(l.item<double>());
  }
  INFO("first loss " << losses.front() << ", last " << losses.back());
  CHECK(losses.back() < 0.5 * losses.front());
  for (size_t i = 1; i < losses.size(); ++i) CHECK(losses[i] < losses[i - 1] + 1e-6);
}

TEST_CASE("docs/nn.md: the TextClassifier example runs", "[nn]") {
  // The body of the example in docs/nn.md (keep the two in step).
  manual_seed(0);
  auto model = std::make_shared<TextClassifier>(/*vocab=*/100, /*dim=*/16, /*classes=*/4);
  optim::SGD optimizer(model->parameters(), /*lr=*/0.5);
  nn::CrossEntropyLoss criterion;

  Tensor tokens = randint(0, 100, {8, 12});  // (batch, sequence) of token ids
  Tensor labels = randint(0, 4, {8});        // (batch)
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    optimizer.zero_grad();
    Tensor loss = criterion(model->forward(tokens), labels);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < 0.5 * first);
  CHECK(model->str() ==
        "TextClassifier(\n  (embedding): Embedding(100, 16)\n  (fc): Linear(in_features=16, out_features=4, bias=True)\n)");
}

// ---- the layers against plain loops ------------------------------------------------------------
namespace {

// x (..., in) · w (out, in)^T + b, in double.
std::vector<double> ref_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t in = w.size(1), out = w.size(0);
  int64_t rows = 1;  // x's leading dims (x.numel() / in fails for in = 0)
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  const std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>(size_t(out));
  std::vector<double> y;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bv[size_t(o)];
      for (int64_t i = 0; i < in; ++i) s += xv[size_t(r * in + i)] * wv[size_t(o * in + i)];
      y.push_back(s);
    }
  return y;
}

// Normalises each group of `group` consecutive values, then * w + b (w, b of `group` values).
std::vector<double> ref_layer_norm(const Tensor& x, int64_t group, const Tensor& w, const Tensor& b, double eps) {
  const std::vector<double> xv = values(x);
  const std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(size_t(group), 1.0);
  const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(size_t(group), 0.0);
  std::vector<double> y(xv.size());
  for (size_t r = 0; r < xv.size(); r += size_t(group)) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < size_t(group); ++i) mean += xv[r + i] / double(group);
    for (size_t i = 0; i < size_t(group); ++i) var += (xv[r + i] - mean) * (xv[r + i] - mean) / double(group);
    for (size_t i = 0; i < size_t(group); ++i) y[r + i] = (xv[r + i] - mean) / std::sqrt(var + eps) * wv[i] + bv[i];
  }
  return y;
}

std::vector<double> elementwise(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> out = values(x);
  for (double& v : out) v = f(v);
  return out;
}

double gelu_ref(double x, bool tanh_form) {
  if (!tanh_form) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST_CASE("Linear matches a plain loop for every float dtype and layout", "[nn]") {
  for (DType dt : float_dtypes()) {
    nn::Linear lin(4, 5), nobias(nn::LinearOptions(4, 5).bias(false));
    lin->to(dt);
    nobias->to(dt);
    for (auto& [layout, x] : std::vector<std::pair<std::string, Tensor>>{
             {"contiguous", random_nonzero({3, 4}, dt)},
             {"transposed", random_nonzero({4, 3}, dt).t()},
             {"3-D sliced", random_nonzero({2, 3, 8}, dt).slice(2, 0, 8, 2)},
             {"1-D", random_nonzero({4}, dt)}}) {
      INFO(dtype_name(dt) << " " << layout);
      Tensor y = lin(x);
      Shape shape = x.sizes();
      shape.back() = 5;
      CHECK(y.sizes() == shape);
      CHECK(y.dtype() == dt);
      check_close(y, ref_linear(x, lin->weight, lin->bias), dt);
      check_close(nobias(x), ref_linear(x, nobias->weight, Tensor()), dt);
    }
  }
}

TEST_CASE("linear with a bias is one op: bias added inside the GEMM, 16-bit rounded once, empty shapes",
          "[nn]") {
  manual_seed(23);
  // One node for the three inputs.
  const Tensor x = random_nonzero({6, 4}).requires_grad_(true), w = random_nonzero({5, 4}).requires_grad_(true),
               b = random_nonzero({5}).requires_grad_(true);
  const Tensor y = nn::functional::linear(x, w, b);
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name() == "LinearBackward");

  // bfloat16: the sum and the bias meet in float32 and the result is rounded once, so every
  // element is within half a bfloat16 step (plus float32 slack) of the exact value; rounding
  // the product first and the sum again (the composition) misses that by up to a whole step.
  for (int64_t rows : {64, 300}) {
    const Tensor xb = random_nonzero({rows, 96}, kBFloat16), wb = random_nonzero({40, 96}, kBFloat16),
                 bb = random_nonzero({40}, kBFloat16, -8, 8);
    const std::vector<double> got = values(nn::functional::linear(xb, wb, bb));
    const std::vector<double> exact = ref_linear(xb, wb, bb);
    int64_t worse = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double step = std::ldexp(1.0, std::ilogb(exact[i]) - 7);  // bfloat16's spacing at exact[i]
      if (std::abs(got[i] - exact[i]) > 0.5 * step * (1 + 1e-3) + 1e-6 * std::abs(exact[i])) ++worse;
    }
    INFO(rows << " rows");
    CHECK(worse == 0);
  }

  // No rows; no inputs (y = the bias); no outputs. Gradients of the shapes of the inputs.
  for (auto [rows, in, out] : {std::tuple<int64_t, int64_t, int64_t>{0, 4, 3}, {3, 0, 4}, {3, 4, 0}}) {
    INFO(rows << " rows, " << in << " in, " << out << " out");
    const Tensor xe = random_nonzero({rows, in}).requires_grad_(true);
    const Tensor we = random_nonzero({out, in}).requires_grad_(true), be = random_nonzero({out}).requires_grad_(true);
    const Tensor ye = nn::functional::linear(xe, we, be);
    CHECK(ye.sizes() == Shape{rows, out});
    CHECK(values(ye) == ref_linear(xe, we, be));
    ye.sum().backward();
    CHECK(xe.grad().sizes() == xe.sizes());
    CHECK(values(we.grad()) == std::vector<double>(size_t(out * in), 0.0));
    CHECK(values(be.grad()) == std::vector<double>(size_t(out), double(rows)));
  }

  // Operands that disagree still get the composition's errors.
  CHECK_THROWS_AS(nn::functional::linear(random_nonzero({2, 4}), random_nonzero({5, 4}, kFloat64), random_nonzero({5})),
                  DTypeError);
}

TEST_CASE("cuda nn: linear with a bias matches float64 on the CPU, forward and gradients, for every float dtype",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(29);
  // The float64 forward and backward on the CPU of (x, w, b) with upstream gradient gy.
  struct Result {
    std::vector<double> y, dx, dw, db;
  };
  auto reference = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy) {
    auto leaf_of = [](const Tensor& t) { return t.to(kFloat64).requires_grad_(true); };
    const Tensor x64 = leaf_of(x), w64 = leaf_of(w), b64 = leaf_of(b);
    const Tensor y64 = nn::functional::linear(x64, w64, b64);
    (y64 * gy.to(kFloat64)).sum().backward();
    return Result{values(y64), values(x64.grad()), values(w64.grad()), values(b64.grad())};
  };
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    INFO(dtype_name(dt));
    const Tensor x = random_nonzero({2, 37, 48}, dt), w = random_nonzero({29, 48}, dt), b = random_nonzero({29}, dt);
    const Tensor gy = random_nonzero({2, 37, 29}, dt);
    const Result exact = reference(x, w, b, gy);
    // Each value's sum of |terms|: the scale of float32's accumulated rounding errors.
    const Result scale = reference(x.abs(), w.abs(), b.abs(), gy.abs());
    auto leaf_of = [](const Tensor& t) { return t.to(kCUDA).requires_grad_(true); };
    const Tensor xg = leaf_of(x), wg = leaf_of(w), bg = leaf_of(b);
    const Tensor yg = nn::functional::linear(xg, wg, bg);
    CHECK(yg.device().is_cuda());
    CHECK(yg.dtype() == dt);
    CHECK(yg.grad_fn()->name() == "LinearBackward");
    (yg * gy.to(kCUDA)).sum().backward();
    // Rounded once to dt (a whole step allowed) after float32 sums of up to 74 terms.
    const double step = dt == kFloat32 ? std::ldexp(1.0, -23) : dt == kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    auto check = [&](const Tensor& got, const std::vector<double>& want, const std::vector<double>& mag, const char* what) {
      const std::vector<double> g = values(got.to(kCPU));
      REQUIRE(g.size() == want.size());
      for (size_t i = 0; i < g.size(); ++i) {
        INFO(what << " element " << i << ": got " << g[i] << ", expected " << want[i]);
        CHECK(std::abs(g[i] - want[i]) <= step * std::abs(want[i]) + 74 * std::ldexp(1.0, -24) * mag[i]);
      }
    };
    check(yg, exact.y, scale.y, "y");
    check(xg.grad(), exact.dx, scale.dx, "dx");
    check(wg.grad(), exact.dw, scale.dw, "dweight");
    check(bg.grad(), exact.db, scale.db, "dbias");
  }
}

TEST_CASE("Embedding copies the indexed rows for every float dtype", "[nn]") {
  for (DType dt : float_dtypes()) {
    nn::Embedding emb(nn::EmbeddingOptions(7, 3).padding_idx(2));
    emb->to(dt);
    const Tensor idx = tensor<int64_t>({6, 0, 2, 2, 5, 0, 1, 3}, {2, 4});
    for (const Tensor& indices : {idx, idx.t(), idx.to(kInt32)}) {
      INFO(dtype_name(dt) << " indices " << shape_str(indices.sizes()) << " " << dtype_name(indices.dtype()));
      Tensor y = emb(indices);
      CHECK(y.sizes() == Shape{indices.size(0), indices.size(1), 3});
      std::vector<double> expected;
      const std::vector<double> w = values(emb->weight);
      for (int64_t i : indices.to_vector<int64_t>())
        for (int64_t d = 0; d < 3; ++d) expected.push_back(w[size_t(i * 3 + d)]);
      CHECK(values(y) == expected);  // exact copies
    }
  }
}

TEST_CASE("LayerNorm matches a plain loop for every float dtype and layout", "[nn]") {
  for (DType dt : float_dtypes()) {
    for (auto& [layout, x] : std::vector<std::pair<std::string, Tensor>>{
             {"contiguous", random_nonzero({3, 2, 4}, dt)},
             {"permuted", random_nonzero({4, 3, 2}, dt).permute({1, 2, 0})},
             {"broadcast", random_nonzero({1, 2, 4}, dt).expand({3, 2, 4})}}) {
      for (bool two_d : {false, true}) {
        INFO(dtype_name(dt) << " " << layout << (two_d ? " normalized (2, 4)" : " normalized (4,)"));
        nn::LayerNorm ln(nn::LayerNormOptions(two_d ? Shape{2, 4} : Shape{4}).eps(1e-3));
        ln->to(dt);
        {
          NoGradGuard no_grad;
          ln->weight.copy_(random_nonzero(ln->weight.sizes()));
          ln->bias.copy_(random_nonzero(ln->bias.sizes()));
        }
        Tensor y = ln(x);
        CHECK(y.dtype() == dt);
        check_close(y, ref_layer_norm(x, two_d ? 8 : 4, ln->weight, ln->bias, 1e-3), dt);
        check_close(nn::functional::layer_norm(x, two_d ? Shape{2, 4} : Shape{4}),
                    ref_layer_norm(x, two_d ? 8 : 4, Tensor(), Tensor(), 1e-5), dt, "functional, no affine");
      }
    }
  }
}

TEST_CASE("ReLU, GELU, Tanh and Sigmoid modules match plain loops for every float dtype", "[nn]") {
  for (DType dt : float_dtypes()) {
    for (const Tensor& x : {random_nonzero({3, 5}, dt, -4, 4), random_nonzero({5, 3}, dt, -4, 4).t()}) {
      INFO(dtype_name(dt) << (x.is_contiguous() ? " contiguous" : " transposed"));
      check_close(nn::ReLU()(x), elementwise(x, [](double v) { return v > 0 ? v : 0; }), dt, "relu");
      check_close(nn::Tanh()(x), elementwise(x, [](double v) { return std::tanh(v); }), dt, "tanh");
      check_close(nn::Sigmoid()(x), elementwise(x, [](double v) { return 1 / (1 + std::exp(-v)); }), dt, "sigmoid");
      check_close(nn::GELU()(x), elementwise(x, [](double v) { return gelu_ref(v, false); }), dt, "gelu");
      check_close(nn::GELU("tanh")(x), elementwise(x, [](double v) { return gelu_ref(v, true); }), dt, "gelu tanh");
    }
  }
}

TEST_CASE("Linear, Embedding, LayerNorm and GELU pass gradcheck", "[nn]") {
  using Inputs = std::vector<Tensor>;
  // Linear: input, weight and bias; the input transposed and 3-D.
  const Tensor x = leaf({4, 3}), x3 = leaf({2, 3, 4}), w = leaf({5, 4}), b = leaf({5});
  CHECK(gradcheck([](const Inputs& in) { return nn::functional::linear(in[0].t(), in[1], in[2]); }, {x, w, b}));
  CHECK(gradcheck([](const Inputs& in) { return nn::functional::linear(in[0], in[1], in[2]); }, {x3, w, b}));
  CHECK(gradcheck([](const Inputs& in) { return nn::functional::linear(in[0], in[1]); }, {x3, w}));
  // Embedding: the weight, with repeated indices, with and without a padding row.
  const Tensor table = leaf({6, 3});
  const Tensor idx = tensor<int64_t>({1, 4, 1, 0, 5, 4}, {2, 3});
  for (int64_t pad : {-1, 1}) {
    INFO("padding_idx " << pad);
    // The padding row is read but gets no gradient (by design, as PyTorch): mask its
    // outputs so that the finite differences see no dependence on it either.
    const Tensor kept = idx.ne(pad).unsqueeze(-1).to(kFloat64);  // (2, 3, 1)
    CHECK(gradcheck([&](const Inputs& in) { return embedding(in[0], idx, pad) * kept; }, {table}));
  }
  // LayerNorm over (4,) and (2, 4), on a permuted input.
  const Tensor xl = leaf({4, 3, 2}), w1 = leaf({4}), b1 = leaf({4}), w2 = leaf({2, 4}), b2 = leaf({2, 4});
  CHECK(gradcheck([](const Inputs& in) { return nn::functional::layer_norm(in[0].permute({1, 2, 0}), {4}, in[1], in[2]); },
                  {xl, w1, b1}));
  CHECK(gradcheck([](const Inputs& in) { return nn::functional::layer_norm(in[0].permute({1, 2, 0}).transpose(1, 2), {2, 4}, in[1], in[2]); },
                  {leaf({2, 3, 4}), w2, b2}));
  CHECK(gradcheck([](const Inputs& in) { return nn::functional::layer_norm(in[0], {3, 2}); }, {xl}));
  // GELU, both forms, on a transposed input.
  const Tensor xg = leaf({4, 3}, -4, 4);
  CHECK(gradcheck([](const Inputs& in) { return nn::GELU()(in[0].t()); }, {xg}));
  CHECK(gradcheck([](const Inputs& in) { return nn::GELU("tanh")(in[0].t()); }, {xg}));
}

TEST_CASE("Dropout zeroes a fraction p and scales the rest, only in training", "[nn]") {
  manual_seed(7);
  nn::Dropout drop(0.3);
  CHECK(drop->str() == "Dropout(p=0.3, inplace=False)");
  Tensor x = ones({200, 500}).requires_grad_(true);
  Tensor y = drop(x);
  const std::vector<double> v = values(y);
  double zeros_seen = 0;
  for (double e : v) {
    if (e == 0) ++zeros_seen;
    else REQUIRE(std::abs(e - 1 / 0.7) < 1e-6);
  }
  CHECK(std::abs(zeros_seen / double(v.size()) - 0.3) < 0.01);  // 7 standard deviations
  y.backward(ones({200, 500}));
  CHECK(values(x.grad()) == v);  // the same mask, scaled by 1 / (1 - p)

  drop->eval();
  const Tensor z = random_nonzero({3, 4});
  CHECK(values(drop(z)) == values(z));
  drop->train();
  CHECK(values(nn::Dropout(0.0)(z)) == values(z));
  CHECK(nn::Dropout(1.0)(z).abs().sum().item<double>() == 0.0);
  // Every element dropped independently: two draws differ.
  CHECK(values(drop(x)) != values(drop(x)));
}

TEST_CASE("Sequential applies its layers in order and names them 0, 1, ...", "[nn]") {
  nn::Sequential seq(nn::Linear(4, 8), nn::Tanh(), nn::Linear(8, 2));
  CHECK(seq->size() == 3);
  const Tensor x = random_nonzero({5, 4});
  auto params = seq->named_parameters();
  REQUIRE(names_of(params) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  Tensor expected = nn::functional::linear(nn::functional::linear(x, params[0].second, params[1].second).tanh(),
                                           params[2].second, params[3].second);
  check_close(seq(x), expected);
  seq->push_back(nn::Sigmoid());
  CHECK(seq->size() == 4);
  check_close(seq(x), expected.sigmoid());
  CHECK(seq->named_children().back().first == "3");
}

// ---- initialisation --------------------------------------------------------------------------
namespace {
struct Stats {
  double mean, var, max_abs;
};
Stats stats_of(const Tensor& t) {
  const std::vector<double> v = values(t);
  Stats s{0, 0, 0};
  for (double e : v) s.mean += e / double(v.size());
  for (double e : v) {
    s.var += (e - s.mean) * (e - s.mean) / double(v.size());
    s.max_abs = std::max(s.max_abs, std::abs(e));
  }
  return s;
}
}  // namespace

TEST_CASE("default initialisation follows PyTorch's distributions", "[nn]") {
  manual_seed(1234);
  // Linear: weight and bias U(-1/sqrt(in), 1/sqrt(in)), variance bound^2 / 3.
  nn::Linear lin(64, 512);
  const double bound = 1 / std::sqrt(64.0);
  Stats w = stats_of(lin->weight), b = stats_of(lin->bias);
  CHECK(w.max_abs <= bound);
  CHECK(w.max_abs > 0.99 * bound);
  CHECK(std::abs(w.mean) < 0.005);                            // 12 standard errors
  CHECK(std::abs(w.var / (bound * bound / 3) - 1) < 0.03);    // 6 standard errors
  CHECK(b.max_abs <= bound);
  CHECK(b.max_abs > 0.9 * bound);
  CHECK(std::abs(b.var / (bound * bound / 3) - 1) < 0.2);
  CHECK(lin->weight.dtype() == kFloat32);

  // Embedding: N(0, 1); the padding row zero.
  nn::Embedding emb(nn::EmbeddingOptions(1000, 64).padding_idx(3));
  Stats e = stats_of(emb->weight);
  CHECK(std::abs(e.mean) < 0.02);
  CHECK(std::abs(std::sqrt(e.var) - 1) < 0.02);
  CHECK(e.max_abs > 3.5);  // normal tails, not a bounded distribution
  CHECK(emb->weight[3].abs().sum().item<double>() == 0.0);

  // LayerNorm: weight 1, bias 0.
  nn::LayerNorm ln(nn::LayerNormOptions({2, 3}));
  CHECK(values(ln->weight) == std::vector<double>(6, 1.0));
  CHECK(values(ln->bias) == std::vector<double>(6, 0.0));

  // reset_parameters draws again.
  const std::vector<double> before = values(lin->weight);
  lin->reset_parameters();
  CHECK(values(lin->weight) != before);
}

TEST_CASE("nn::init fills in place with the documented bounds", "[nn]") {
  manual_seed(5);
  Tensor t = empty({256, 32, 3, 3});  // fan_in 32·9 = 288, fan_out 256·9 = 2304
  CHECK(nn::init::fan_in_and_fan_out(t) == std::pair<int64_t, int64_t>{288, 2304});
  Tensor& same = nn::init::kaiming_uniform_(t);
  CHECK(&same == &t);
  Stats s = stats_of(t);
  const double kaiming = std::sqrt(2.0) * std::sqrt(3.0 / 288);
  CHECK(s.max_abs <= kaiming);
  CHECK(s.max_abs > 0.99 * kaiming);
  nn::init::xavier_uniform_(t, 2.0);
  s = stats_of(t);
  const double xavier = 2.0 * std::sqrt(6.0 / (288 + 2304));
  CHECK(s.max_abs <= xavier);
  CHECK(s.max_abs > 0.99 * xavier);
  Tensor n = empty({100000});
  nn::init::normal_(n, 3.0, 0.5);
  s = stats_of(n);
  CHECK(std::abs(s.mean - 3.0) < 0.01);
  CHECK(std::abs(std::sqrt(s.var) - 0.5) < 0.01);
  nn::init::uniform_(n, -1.0, 3.0);
  s = stats_of(n);
  CHECK(std::abs(s.mean - 1.0) < 0.02);
  CHECK(s.max_abs <= 3.0);
  nn::init::constant_(n, 0.25);
  CHECK(n.max().item<double>() == 0.25);
  CHECK(n.min().item<double>() == 0.25);
  // A parameter (a leaf requiring grad) is filled without recording history.
  Tensor p = ones({3, 4}).requires_grad_(true);
  nn::init::zeros_(p);
  CHECK((p.is_leaf() && p.requires_grad()));
  CHECK(p.abs().sum().item<double>() == 0.0);
  require_throws_with<ShapeError>([] { nn::init::fan_in_and_fan_out(empty({5})); }, {"init", "(5,)"});
}

// ---- errors ----------------------------------------------------------------------------------
TEST_CASE("layers reject bad options and inputs with clear errors", "[nn]") {
  nn::Linear lin(4, 5);
  require_throws_with<ShapeError>([&] { lin(randn({3, 7})); }, {"linear", "(3, 7)", "(5, 4)"});
  require_throws_with<ShapeError>([&] { nn::functional::linear(randn({3, 4}), randn({4})); }, {"linear", "(4,)"});
  require_throws_with<ShapeError>([&] { nn::functional::linear(randn({3, 4}), randn({5, 4}), randn({4})); },
                                  {"linear", "bias", "(4,)", "5"});
  require_throws_with<ValueError>([] { nn::Linear(0, 3); }, {"Linear", "0"});

  nn::Embedding emb(10, 4);
  require_throws_with<IndexError>([&] { emb(tensor<int64_t>({1, 10})); }, {"embedding", "10"});
  require_throws_with<DTypeError>([&] { emb(tensor<float>({1.f, 2.f})); }, {"embedding", "float32"});
  require_throws_with<IndexError>([] { nn::Embedding(nn::EmbeddingOptions(10, 4).padding_idx(10)); },
                                  {"Embedding", "padding_idx", "10"});
  require_throws_with<IndexError>([] { nn::Embedding(nn::EmbeddingOptions(10, 4).padding_idx(-11)); },
                                  {"Embedding", "padding_idx", "-11"});
  require_throws_with<ValueError>([] { nn::Embedding(0, 4); }, {"Embedding", "0"});

  nn::LayerNorm ln(8);
  require_throws_with<ShapeError>([&] { ln(randn({3, 7})); }, {"layer_norm", "(3, 7)", "(8,)"});
  require_throws_with<ShapeError>([&] { nn::functional::layer_norm(randn({4}), {2, 4}); }, {"layer_norm", "(4,)", "(2, 4)"});
  require_throws_with<ValueError>([] { nn::LayerNorm(nn::LayerNormOptions({2, 0})); }, {"LayerNorm", "(2, 0)"});

  require_throws_with<ValueError>([] { nn::GELU("fast"); }, {"GELU", "'fast'"});
  require_throws_with<ValueError>([] { nn::Dropout(1.5); }, {"Dropout", "1.5"});
  require_throws_with<ValueError>([] { nn::functional::dropout(ones({2}), -0.1, true); }, {"dropout", "-0.1"});
}
