// nn::MultiheadAttention, nn::TransformerEncoderLayer and nn::TransformerEncoder against
// PyTorch 2.x (tests/golden/make_transformer_golden.py): PyTorch's state dicts load, and the
// outputs, the attention weights and every gradient (inputs and parameters) match in float32
// to 1e-5. Plus initialisation, masks, the helpers and the errors.
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(LOOM_TEST_DATA_DIR) + "/transformer.safetensors");
  return f;
}

int64_t option(const std::string& c, const std::string& key) {
  return std::stoll(fixture().metadata.at(c + "." + key));
}

Tensor entry(const std::string& key) { return fixture().tensors.at(key).to(kFloat32); }

// The case's mask in PyTorch's convention (bool true = may not attend), or undefined.
Tensor mask(const std::string& c, const std::string& name) {
  const auto it = fixture().tensors.find(c + "." + name);
  if (it == fixture().tensors.end()) return Tensor();
  return option(c, name + "_is_bool") ? it->second.ne(0) : it->second.to(kFloat32);
}

void load_pytorch_state(nn::Module& m, const std::string& c) {
  nn::StateDict state;
  const std::string prefix = c + ".p.";
  for (const auto& [k, v] : fixture().tensors)
    if (k.starts_with(prefix)) state[k.substr(prefix.size())] = v.to(kFloat32);
  m.load_state_dict(state);  // strict: Loom's names are PyTorch's
}

void check_golden(const Tensor& actual, const std::string& key) {
  INFO(key);
  const Tensor expected = fixture().tensors.at(key);
  REQUIRE(actual.sizes() == expected.sizes());
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - e[i]) / (1.0 + std::abs(e[i])));
  CHECK(worst <= 1e-5);
}

// Backward of sum(out * gy) + sum(weights * gw), then every gradient against PyTorch's.
void check_gradients(nn::Module& m, const std::string& c, const Tensor& out, const Tensor& weights,
                     const std::map<std::string, Tensor>& inputs) {
  check_golden(out, c + ".out");
  Tensor loss = (out * entry(c + ".gy")).sum();
  if (weights.defined()) {
    check_golden(weights, c + ".weights");
    loss = loss + (weights * entry(c + ".gw")).sum();
  }
  loss.backward();
  for (const auto& [name, x] : inputs) check_golden(x.grad(), c + ".g." + name);
  for (const auto& [name, p] : m.named_parameters()) check_golden(p.grad(), c + ".g.p." + name);
}

void run_attention_case(const std::string& c) {
  auto options = nn::MultiheadAttentionOptions(option(c, "embed_dim"), option(c, "num_heads"))
                     .batch_first(option(c, "batch_first"))
                     .kdim(option(c, "kdim"))
                     .vdim(option(c, "vdim"))
                     .bias(option(c, "bias"));
  nn::MultiheadAttention attention(options);
  load_pytorch_state(*attention, c);
  std::map<std::string, Tensor> inputs{{"query", entry(c + ".query").requires_grad_(true)}};
  const bool self = option(c, "self_attention");
  if (!self) {
    inputs["key"] = entry(c + ".key").requires_grad_(true);
    inputs["value"] = entry(c + ".value").requires_grad_(true);
  }
  const Tensor& q = inputs["query"];
  auto [out, weights] = attention(q, self ? q : inputs["key"], self ? q : inputs["value"],
                                  mask(c, "key_padding_mask"), option(c, "need_weights"), mask(c, "attn_mask"),
                                  option(c, "average"));
  CHECK(weights.defined() == bool(option(c, "need_weights")));
  check_gradients(*attention, c, out, weights, inputs);
}

void run_encoder_case(const std::string& c) {
  auto options = nn::TransformerEncoderLayerOptions(option(c, "d_model"), option(c, "nhead"))
                     .dim_feedforward(option(c, "dim_feedforward"))
                     .dropout(0.0)
                     .activation(fixture().metadata.at(c + ".activation"))
                     .batch_first(option(c, "batch_first"))
                     .norm_first(option(c, "norm_first"))
                     .bias(option(c, "bias"));
  const Tensor src = entry(c + ".src").requires_grad_(true);
  const Tensor m = mask(c, "attn_mask"), padding = mask(c, "key_padding_mask");
  if (option(c, "layers") == 0) {
    nn::TransformerEncoderLayer layer(options);
    load_pytorch_state(*layer, c);
    check_gradients(*layer, c, layer(src, m, padding), Tensor(), {{"src", src}});
  } else {
    nn::LayerNorm norm = option(c, "final_norm") ? nn::LayerNorm(option(c, "d_model")) : nn::LayerNorm(nullptr);
    nn::TransformerEncoder encoder(options, option(c, "layers"), norm);
    load_pytorch_state(*encoder, c);
    check_gradients(*encoder, c, encoder(src, m, padding), Tensor(), {{"src", src}});
  }
}

}  // namespace

TEST_CASE("MultiheadAttention matches PyTorch: self and cross attention, masks, weights, every gradient",
          "[transformer]") {
  for (const std::string c : {"mha_self", "mha_cross_kvdim", "mha_causal_sdpa", "mha_per_head_mask_no_bias",
                              "mha_head_dim_1"}) {
    SECTION(c) { run_attention_case(c); }
  }
}

TEST_CASE("TransformerEncoderLayer and TransformerEncoder match PyTorch, forward and every gradient",
          "[transformer]") {
  for (const std::string c : {"enc_post_relu", "enc_pre_gelu_causal", "enc_no_bias", "encoder_2_layers_norm",
                              "encoder_3_layers_post"}) {
    SECTION(c) { run_encoder_case(c); }
  }
}

TEST_CASE("MultiheadAttention: PyTorch's initialisation, both paths agree, dropout only in training",
          "[transformer]") {
  manual_seed(3);
  nn::MultiheadAttention attention(nn::MultiheadAttentionOptions(16, 4).batch_first(true).dropout(0.5));
  const double bound = std::sqrt(6.0 / (16 + 48));  // xavier_uniform_ over (48, 16)
  CHECK(attention->in_proj_weight.abs().max().item<double>() <= bound);
  CHECK(attention->in_proj_weight.abs().max().item<double>() > 0.9 * bound);
  CHECK(attention->in_proj_bias.abs().max().item<double>() == 0);
  CHECK(attention->out_proj->bias.abs().max().item<double>() == 0);
  std::vector<std::string> names;
  for (const auto& [name, p] : attention->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});

  const Tensor x = random_nonzero({2, 5, 16}), padding = from_vector(std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 5}).ne(0);
  attention->eval();
  auto [with_weights, w] = attention(x, x, x, padding, /*need_weights=*/true);
  auto [fused, none] = attention(x, x, x, padding, /*need_weights=*/false);
  check_close(fused, with_weights, "the fused path against the explicit weights");
  CHECK(w.sizes() == Shape{2, 5, 5});
  check_close(w.sum(-1), ones({2, 5}), "weights sum to 1 over the keys");
  CHECK(w.select(0, 0).narrow(1, 3, 2).abs().max().item<double>() == 0);  // padded keys get no weight
  attention->train();
  const Tensor dropped = attention(x, x, x, padding, false).output;
  CHECK(dropped.sub(fused).abs().max().item<double>() > 1e-3);
}

TEST_CASE("TransformerEncoder: layers start as copies, PyTorch's names, and the helpers", "[transformer]") {
  nn::TransformerEncoder encoder(nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16), 3,
                                 nn::LayerNorm(8));
  const nn::StateDict state = encoder->state_dict();
  CHECK(state.contains("layers.2.self_attn.in_proj_weight"));
  CHECK(state.contains("layers.0.linear1.weight"));
  CHECK(state.contains("norm.weight"));
  CHECK(state.at("layers.0.linear1.weight").sub(state.at("layers.2.linear1.weight")).abs().max().item<double>() == 0);

  const Tensor causal = nn::generate_square_subsequent_mask(4);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      const double v = causal.select(0, i).select(0, j).item<double>();
      CHECK((j > i ? std::isinf(v) && v < 0 : v == 0));
    }

  const Tensor pe = nn::sinusoidal_positional_encoding(7, 6);
  for (int64_t pos = 0; pos < 7; ++pos)
    for (int64_t i = 0; i < 3; ++i) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / 6);
      CHECK(pe.select(0, pos).select(0, 2 * i).item<double>() == Approx(std::sin(angle)).margin(1e-6));
      CHECK(pe.select(0, pos).select(0, 2 * i + 1).item<double>() == Approx(std::cos(angle)).margin(1e-6));
    }
  nn::PositionalEncoding fixed(6, 7), learned(6, 7, /*learned=*/true);
  const Tensor x = random_nonzero({2, 5, 6});
  check_close(fixed(x), x + pe.narrow(0, 0, 5).unsqueeze(0), "x + the sinusoidal positions");
  CHECK(learned->parameters().size() == 1);
  CHECK(learned->named_parameters().front().first == "embedding.weight");
  CHECK(fixed->parameters().empty());
}

TEST_CASE("MultiheadAttention and the encoder refuse bad options and shapes", "[transformer]") {
  require_throws_with<ValueError>([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "10", "divisible", "3"});
  require_throws_with<ValueError>([] { nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2).activation("tanh")); },
                                  {"TransformerEncoderLayer", "activation", "tanh"});
  require_throws_with<ValueError>([] { nn::TransformerEncoder(nn::TransformerEncoderLayerOptions(8, 2), 0); },
                                  {"num_layers", "0"});
  nn::MultiheadAttention attention(nn::MultiheadAttentionOptions(8, 2).batch_first(true));
  const Tensor x = random_nonzero({2, 5, 8});
  require_throws_with<ShapeError>([&] { attention(x, x, random_nonzero({2, 5, 6})); }, {"MultiheadAttention", "(2, 5, 6)"});
  require_throws_with<ShapeError>([&] { attention(x, x, x, ones({2, 4}).ne(0)); }, {"key_padding_mask", "(2, 4)"});
  require_throws_with<ShapeError>([&] { attention(x, x, x, Tensor(), true, zeros({5, 4})); }, {"attn_mask", "(5, 4)"});
  require_throws_with<ValueError>([&] { attention(x, x, x, Tensor(), true, Tensor(), true, /*is_causal=*/true); },
                                  {"is_causal", "attn_mask"});
  require_throws_with<DTypeError>([&] { attention(x, x, x, Tensor(), true, zeros({5, 5}, kInt64)); }, {"mask", "int64"});
}

TEST_CASE("ModuleList: children named 0, 1, ..., typed access and its errors", "[transformer]") {
  nn::ModuleList list;
  list->push_back(nn::Linear(4, 3));
  list->push_back(nn::LayerNorm(3));
  CHECK(list->size() == 2);
  std::vector<std::string> names;
  for (const auto& [name, p] : list->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  CHECK(list->at<nn::LinearImpl>(0)->weight.sizes() == Shape{3, 4});
  require_throws_with<IndexError>([&] { list->at<nn::LinearImpl>(2); }, {"ModuleList", "index 2", "2"});
  require_throws_with<ValueError>([&] { list->at<nn::LinearImpl>(1); }, {"ModuleList", "module 1", "LayerNorm"});
}
