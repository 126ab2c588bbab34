// print(model)'s parameter counts, forward hooks, and nn::summary (nn/summary.h).
#include "catch2_compat.h"

#include <sstream>

#include "nn/nn.h"
#include "tests/test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

struct Tagger : nn::Module {
  Tagger()
      : embed(register_module("embed", nn::Embedding(10, 4))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(4, 6).batch_first(true)))),
        head(register_module("head", nn::Sequential(nn::Linear(6, 5), nn::ReLU(), nn::Linear(5, 3)))) {}
  Tensor forward(const Tensor& ids) { return head(lstm(embed(ids)).output); }
  nn::Embedding embed;
  nn::LSTM lstm;
  nn::Sequential head;
};

}  // namespace

TEST_CASE("print(model) ends with the parameter counts, total and trainable", "[nn][summary]") {
  nn::Linear fc(3, 2);
  fc->bias.requires_grad_(false);
  std::ostringstream os;
  os << fc;
  REQUIRE(os.str() == fc->str() + "\nParameters: 8 total, 6 trainable");
  REQUIRE(fc->parameter_count() == 8);
  REQUIRE(fc->parameter_count(true) == 6);
  REQUIRE(nn::format_count(1234567) == "1,234,567");
  REQUIRE(nn::format_count(999) == "999");
  REQUIRE(nn::format_count(0) == "0");
}

TEST_CASE("forward hooks see the outputs of modules called through their handles", "[nn][summary]") {
  nn::Sequential mlp(nn::Linear(4, 3), nn::ReLU());
  std::vector<Shape> seen;
  auto first = mlp->named_children()[0].second;
  const int64_t id = first->register_forward_hook([&](nn::Module& m, const Tensor& out) {
    REQUIRE(&m == first.get());
    seen.push_back(out.sizes());
  });
  mlp(randn({2, 4}));
  mlp(randn({5, 4}));
  REQUIRE(seen == std::vector<Shape>{{2, 3}, {5, 3}});
  first->remove_forward_hook(id);
  mlp(randn({1, 4}));
  REQUIRE(seen.size() == 2);
  REQUIRE_FALSE(first->has_forward_hooks());
  // A result struct's output: LSTM's RNNOutput.
  nn::LSTM lstm(nn::RNNOptions(4, 6));
  Shape lstm_out;
  lstm->register_forward_hook([&](nn::Module&, const Tensor& out) { lstm_out = out.sizes(); });
  lstm(randn({7, 2, 4}));
  REQUIRE(lstm_out == Shape{7, 2, 6});
}

TEST_CASE("nn::summary lists every module's name, output shape and parameters", "[nn][summary]") {
  auto model = std::make_shared<Tagger>();
  const std::string s = nn::summary(*model, randint(0, 10, {2, 7}));
  INFO(s);
  // Embedding 40; LSTM 4*6*(4 + 6) + 2*4*6 = 288; Linear 6*5 + 5 = 35 and 5*3 + 3 = 18.
  REQUIRE(s.find("Tagger") != std::string::npos);
  REQUIRE(s.find("embed (Embedding)") != std::string::npos);
  REQUIRE(s.find("(2, 7, 4)") != std::string::npos);
  REQUIRE(s.find("lstm (LSTM)") != std::string::npos);
  REQUIRE(s.find("(2, 7, 6)") != std::string::npos);
  REQUIRE(s.find("  head.0 (Linear)") != std::string::npos);
  REQUIRE(s.find("(2, 7, 5)") != std::string::npos);
  REQUIRE(s.find("(2, 7, 3)") != std::string::npos);
  REQUIRE(s.find("Total params: 381") != std::string::npos);
  REQUIRE(s.find("Trainable params: 381") != std::string::npos);
  REQUIRE(s.find("Non-trainable params: 0") != std::string::npos);
  std::istringstream lines(s);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  // Header, rule, 7 modules (the root, embed, lstm, head, its three layers), rule, 3 totals.
  REQUIRE(rows.size() == 13);
  REQUIRE(rows[4].find("288") != std::string::npos);
  // The hooks are gone afterwards; a holder works as well as the module.
  for (auto& [name, m] : model->named_modules()) REQUIRE_FALSE(m->has_forward_hooks());
  nn::Sequential mlp(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  const std::string t = nn::summary(mlp, randn({3, 4}));
  REQUIRE(t.find("(3, 8)") != std::string::npos);
  REQUIRE(t.find("Total params: 58") != std::string::npos);
}
