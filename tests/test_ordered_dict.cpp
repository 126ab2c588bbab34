// OrderedDict (core/ordered_dict.h) and the order of state_dict(): the dictionary against
// a plain vector-of-pairs reference over random operations, its edge cases (re-assigning
// keeps the position, missing keys, copies); state_dict() keys of nn::LSTM, a nested
// custom model with buffers and nn::Sequential compared with the exact lists PyTorch
// prints; load_state_dict's report of missing, unexpected and mis-shaped keys in that
// order.
#include <random>

#include "core/ordered_dict.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

using Keys = std::vector<std::string>;

template <typename V>
std::vector<std::pair<std::string, V>> entries_of(const OrderedDict<V>& d) {
  std::vector<std::pair<std::string, V>> out;
  for (const auto& [k, v] : d) out.emplace_back(k, v);
  return out;
}

// The registrations of torch.nn.BatchNorm1d(features), which Loom does not have; the
// buffers are registered first to show that a state dict lists parameters before buffers.
struct BatchNormLikeImpl : nn::Module {
  explicit BatchNormLikeImpl(int64_t features) : nn::Module("BatchNorm1d") {
    register_buffer("running_mean", zeros({features}));
    register_buffer("running_var", ones({features}));
    register_buffer("num_batches_tracked", scalar_tensor(0, kInt64));
    register_parameter("weight", ones({features}));
    register_parameter("bias", zeros({features}));
  }
  Tensor forward(const Tensor& x) { return x; }
};
using BatchNormLike = nn::ModuleHolder<BatchNormLikeImpl>;

// Parameters, buffers and children registered interleaved, two levels deep.
struct InnerState : nn::Module {
  InnerState() {
    register_buffer("scale", ones({4}));
    register_parameter("gain", ones({4}));
    register_buffer("count", zeros({1}, kInt64));
    register_parameter("shift", zeros({4}));
    register_module("proj", nn::Linear(4, 4));
  }
};

struct NestedNet : nn::Module {
  NestedNet() {
    register_module("embedding", nn::Embedding(10, 4));
    register_buffer("mask", ones({4}));
    register_module("inner", std::make_shared<InnerState>());
    register_parameter("bias", zeros({2}));
    register_module("fc", nn::Linear(4, 2));
  }
};

}  // namespace

// ---- OrderedDict ------------------------------------------------------------------------------
TEST_CASE("OrderedDict keeps insertion order, and re-assigning a key keeps its position", "[ordered_dict]") {
  OrderedDict<int> d;
  CHECK(d.empty());
  d["zeta"] = 1;
  d["alpha"] = 2;
  d["mid"] = 3;
  CHECK(d.keys() == Keys{"zeta", "alpha", "mid"});  // a std::map would sort them
  d["alpha"] = 20;                                   // in place, as a Python dict
  CHECK(entries_of(d) == std::vector<std::pair<std::string, int>>{{"zeta", 1}, {"alpha", 20}, {"mid", 3}});

  // insert/emplace leave an existing key alone (as std::map); insert_or_assign overwrites.
  auto [it, inserted] = d.insert({"zeta", 100});
  CHECK_FALSE(inserted);
  CHECK(it->second == 1);
  CHECK(d.emplace("beta", 4).second);
  CHECK(d.insert_or_assign("zeta", 10).second == false);
  CHECK(entries_of(d) ==
        std::vector<std::pair<std::string, int>>{{"zeta", 10}, {"alpha", 20}, {"mid", 3}, {"beta", 4}});

  // Lookup.
  CHECK(d.size() == 4);
  CHECK(d.contains("mid"));
  CHECK(d.count("gamma") == 0);
  CHECK(d.find("gamma") == d.end());
  REQUIRE(d.find("mid") != d.end());
  d.find("mid")->second = 30;
  const OrderedDict<int>& cd = d;
  CHECK(cd.at("mid") == 30);
  CHECK(cd.find("beta")->second == 4);

  // Erasing and re-inserting moves a key to the end; iterators to other entries survive.
  auto beta = d.find("beta");
  CHECK(d.erase("alpha") == 1);
  CHECK(d.erase("alpha") == 0);
  d["alpha"] = 2;
  CHECK(d.keys() == Keys{"zeta", "mid", "beta", "alpha"});
  CHECK(beta->first == "beta");
  d.clear();
  CHECK((d.empty() && d.find("zeta") == d.end()));
}

TEST_CASE("OrderedDict::at names the missing key in an IndexError", "[ordered_dict]") {
  OrderedDict<Tensor> d{{"weight", ones({2})}};
  require_throws_with<IndexError>([&] { d.at("lstm.bias_hh_l0"); }, {"OrderedDict::at", "'lstm.bias_hh_l0'"});
  const OrderedDict<Tensor>& cd = d;
  require_throws_with<IndexError>([&] { cd.at(""); }, {"no key ''"});
  CHECK(d.at("weight").to_vector<float>() == std::vector<float>{1.f, 1.f});
}

TEST_CASE("OrderedDict construction: lists, ranges, std::map, copies and moves", "[ordered_dict]") {
  // A repeated key keeps its first position and takes its last value (as Python's dict).
  OrderedDict<int> d{{"b", 1}, {"a", 2}, {"b", 3}};
  CHECK(entries_of(d) == std::vector<std::pair<std::string, int>>{{"b", 3}, {"a", 2}});
  const std::vector<std::pair<std::string, int>> pairs{{"y", 1}, {"x", 2}};
  CHECK(OrderedDict<int>(pairs.begin(), pairs.end()).keys() == Keys{"y", "x"});
  const std::map<std::string, int> sorted{{"y", 1}, {"x", 2}};
  const OrderedDict<int> from_map = sorted;  // implicit, as a safetensors TensorMap converts
  CHECK(from_map.keys() == Keys{"x", "y"});

  // A copy is independent: its own entries and its own index.
  OrderedDict<int> copy = d;
  copy["b"] = 30;
  copy.find("a")->second = 20;
  copy["c"] = 4;
  CHECK(entries_of(d) == std::vector<std::pair<std::string, int>>{{"b", 3}, {"a", 2}});
  CHECK(entries_of(copy) == std::vector<std::pair<std::string, int>>{{"b", 30}, {"a", 20}, {"c", 4}});
  d = copy;
  d.erase("b");
  CHECK(copy.keys() == Keys{"b", "a", "c"});
  CHECK(d.keys() == Keys{"a", "c"});

  // A move carries the index along: lookups in the new owner find its entries.
  OrderedDict<int> moved = std::move(copy);
  moved.find("c")->second = 40;
  CHECK(entries_of(moved) == std::vector<std::pair<std::string, int>>{{"b", 30}, {"a", 20}, {"c", 40}});
  OrderedDict<int> target{{"z", 0}};
  target = std::move(moved);
  target["a"] = 21;
  CHECK(entries_of(target) == std::vector<std::pair<std::string, int>>{{"b", 30}, {"a", 21}, {"c", 40}});
}

TEST_CASE("OrderedDict matches a plain vector-of-pairs reference over random operations", "[ordered_dict]") {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> key_of(0, 11), op_of(0, 4), value_of(-1000, 1000);
  OrderedDict<int> d;
  std::vector<std::pair<std::string, int>> ref;  // insertion order, found by linear search
  auto ref_find = [&](const std::string& k) {
    return std::find_if(ref.begin(), ref.end(), [&](const auto& e) { return e.first == k; });
  };
  for (int step = 0; step < 3000; ++step) {
    const std::string k = "k" + std::to_string(key_of(rng));
    const int v = value_of(rng);
    auto r = ref_find(k);
    switch (op_of(rng)) {
      case 0:  // operator[] assignment
        d[k] = v;
        if (r == ref.end()) ref.emplace_back(k, v);
        else r->second = v;
        break;
      case 1:  // insert leaves an existing value
        CHECK(d.insert({k, v}).second == (r == ref.end()));
        if (r == ref.end()) ref.emplace_back(k, v);
        break;
      case 2:
        CHECK(d.erase(k) == (r == ref.end() ? 0u : 1u));
        if (r != ref.end()) ref.erase(r);
        break;
      case 3:  // lookups
        CHECK(d.contains(k) == (r != ref.end()));
        if (r != ref.end()) CHECK(d.at(k) == r->second);
        else CHECK(d.find(k) == d.end());
        break;
      default:  // a copy sees the same entries
        CHECK(entries_of(OrderedDict<int>(d)) == ref);
    }
    REQUIRE(d.size() == ref.size());
  }
  CHECK(entries_of(d) == ref);
}

// ---- state_dict order -------------------------------------------------------------------------
TEST_CASE("state_dict of a bidirectional two-layer LSTM lists PyTorch's keys in its order", "[ordered_dict][nn]") {
  // /usr/bin/python3 -c "import torch; print(list(torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).state_dict()))"
  const Keys pytorch{"weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
                     "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
                     "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
                     "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  nn::LSTM lstm(nn::RNNOptions(3, 4).num_layers(2).bidirectional(true));
  CHECK(lstm->state_dict().keys() == pytorch);
}

TEST_CASE("state_dict lists each module's parameters, then its buffers, then its children", "[ordered_dict][nn]") {
  // /usr/bin/python3 -c "import torch; nn=torch.nn; i=nn.Module(); i.register_buffer('scale', torch.ones(4)); i.gain=nn.Parameter(torch.ones(4)); i.register_buffer('count', torch.zeros(1, dtype=torch.long)); i.shift=nn.Parameter(torch.zeros(4)); i.proj=nn.Linear(4, 4); n=nn.Module(); n.embedding=nn.Embedding(10, 4); n.register_buffer('mask', torch.ones(4)); n.inner=i; n.bias=nn.Parameter(torch.zeros(2)); n.fc=nn.Linear(4, 2); print(list(n.state_dict()))"
  const Keys pytorch{"bias",        "mask",        "embedding.weight",  "inner.gain",      "inner.shift", "inner.scale",
                     "inner.count", "inner.proj.weight", "inner.proj.bias", "fc.weight",   "fc.bias"};
  auto net = std::make_shared<NestedNet>();
  const nn::StateDict sd = net->state_dict();
  CHECK(sd.keys() == pytorch);
  CHECK(sd.at("inner.count").dtype() == kInt64);
  // The same tensors as named_parameters() and named_buffers(), detached.
  for (const auto& named : {net->named_parameters(), net->named_buffers()})
    for (const auto& [name, t] : named) {
      INFO(name);
      CHECK(sd.at(name).data() == t.data());
      CHECK_FALSE(sd.at(name).requires_grad());
    }
  CHECK(sd.size() == net->named_parameters().size() + net->named_buffers().size());

  // /usr/bin/python3 -c "import torch; nn=torch.nn; print(list(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).state_dict()))"
  const Keys pytorch_seq{"0.weight",       "0.bias",         "1.weight", "1.bias", "1.running_mean",
                         "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"};
  nn::Sequential seq(nn::Linear(3, 4), BatchNormLike(4), nn::ReLU(), nn::Linear(4, 2));
  CHECK(seq->state_dict().keys() == pytorch_seq);
}

TEST_CASE("load_state_dict reports missing, unexpected and mis-shaped keys in state_dict order", "[ordered_dict][nn]") {
  auto a = std::make_shared<NestedNet>(), b = std::make_shared<NestedNet>();
  for (auto& [name, t] : a->state_dict())
    if (t.is_floating_point()) t.copy_(randn(t.sizes()));
  a->state_dict().at("inner.count").fill_(7);
  b->load_state_dict(a->state_dict());
  for (const auto& [name, t] : a->state_dict()) {
    INFO(name);
    CHECK(values(b->state_dict().at(name)) == values(t));
  }

  nn::StateDict bad = a->state_dict();
  bad.erase("inner.shift");  // a child's parameter
  bad.erase("mask");         // an own buffer: listed first, as PyTorch lists it
  bad["inner.extra"] = ones({1});
  bad["aaa"] = ones({1});
  bad["inner.proj.weight"] = zeros({3, 4});
  const std::string msg = message_of<ValueError>([&] { b->load_state_dict(bad); });
  CHECK(msg ==
        "NestedNet.load_state_dict: the state does not fit"
        "\n  missing keys: mask, inner.shift"
        "\n  unexpected keys: inner.extra, aaa"
        "\n  shape mismatches: inner.proj.weight: checkpoint (3, 4) vs model (4, 4)");
  bad["inner.proj.weight"] = zeros({4, 4});
  CHECK_NOTHROW(b->load_state_dict(bad, /*strict=*/false));
  CHECK(values(b->state_dict().at("inner.proj.weight")) == std::vector<double>(16, 0.0));
}
