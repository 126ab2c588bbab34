// The Loom side of onnx_runtime_check (tests/onnx/check_onnx.py): exports each example's model
// and randomly drawn module configurations with example inputs of one size, then runs Loom on
// new inputs of other batch and sequence sizes and writes them and Loom's outputs beside the
// model, as <case>.onnx and <case>.json, for ONNX Runtime to run and compare.
//   onnx_driver WORKDIR
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "char_rnn_model.h"
#include "embedding_mean_model.h"
#include "loom.h"
#include "onnx/export.h"
#include "text_classification_model.h"
#include "timeseries_model.h"
#include "transformer_classification_model.h"

using namespace loom;
using Inputs = std::vector<Tensor>;

namespace {

// Elementwise ops, activations, LayerNorm, softmax, reductions and casts between two Linears.
// Causal self-attention on (B, H, T, 2) heads of a projection: the causal mask at any T.
struct CausalAttentionImpl : nn::Module {
  CausalAttentionImpl() : proj(register_module("proj", nn::Linear(4, 12))) {}
  Tensor forward(const Tensor& x) {  // (B, T, 4)
    const int64_t b = x.size(0), t = x.size(1);
    const std::vector<Tensor> qkv = proj(x).reshape({b, t, 3, 2, 2}).permute({2, 0, 3, 1, 4}).unbind(0);
    return nn::functional::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], Tensor(), 0.0, /*is_causal=*/true);
  }
  nn::Linear proj;
};

// An LSTM from zero initial states made in the forward, (B·T, H) folded through a Linear.
struct ZeroStateImpl : nn::Module {
  ZeroStateImpl()
      : lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(4, 4).batch_first(true)))),
        fc(register_module("fc", nn::Linear(4, 4))) {}
  Tensor forward(const Tensor& x) {  // (B, T, 4)
    const int64_t b = x.size(0), t = x.size(1);
    const Tensor h0 = zeros({1, b, 4}), c0 = full({1, b, 4}, 0.5);
    const Tensor y = lstm(x, nn::RNNState{h0, c0}).output;  // (B, T, 4)
    return fc(y.reshape({b * t, 4})).reshape({b, t, 4}) + arange(0, t, 1, kFloat32).reshape({1, t, 1});
  }
  nn::LSTM lstm;
  nn::Linear fc;
};

struct MixedImpl : nn::Module {
  MixedImpl()
      : fc1(register_module("fc1", nn::Linear(5, 8))), norm(register_module("norm", nn::LayerNorm(8))),
        fc2(register_module("fc2", nn::Linear(8, 4))) {}
  Tensor forward(const Tensor& x) {                           // (B, T, 5)
    const Tensor y = fc1(x).relu() + fc1(x).gelu();           // (B, T, 8)
    const Tensor z = y.gelu(true) * y.sigmoid() + y.silu() - y.tanh().abs() / 2.0 + (y * 3.0).clamp(-1.0, 1.0);
    const Tensor w = norm(z).exp().log1p().sqrt().rsqrt().pow(2.0).neg() + z.softmax(-1) - z.log_softmax(1);
    const Tensor v = fc2(w.permute({1, 0, 2}).transpose(0, 1));          // (B, T, 4)
    const Tensor mask = v.gt(0.0).logical_not();
    return where(mask, v.sin(), v.cos()).sum(1) + v.mean(1) * v.to(kFloat64).sum({1, 2}, true).to(kFloat32).squeeze(2);
  }
  nn::Linear fc1;
  nn::LayerNorm norm;
  nn::Linear fc2;
};

nlohmann::json to_json(const Tensor& t_in, const std::string& name) {
  const Tensor t = t_in.contiguous();
  nlohmann::json j{{"name", name}, {"shape", t.sizes()}, {"dtype", dtype_name(t.dtype())}};
  if (t.dtype() == kInt64) j["data"] = t.to_vector<int64_t>();
  else j["data"] = t.to(kFloat64).to_vector<double>();
  return j;
}

// Tokens (B, T) in [1, vocab) and lengths (B) in [1, T], the longest T.
Inputs texts(int64_t B, int64_t T, int64_t vocab, std::mt19937& rng) {
  Tensor lengths = randint(1, T + 1, {B});
  lengths.data_ptr<int64_t>()[0] = T;
  Tensor tokens = randint(1, vocab, {B, T});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = lengths.data_ptr<int64_t>()[b]; t < T; ++t) tokens.data_ptr<int64_t>()[b * T + t] = 0;  // padding
  return {tokens, lengths};
}

struct Case {
  std::string name;
  std::shared_ptr<nn::Module> module;
  onnx::FlatForward forward;
  std::function<Inputs(int64_t B, int64_t T)> inputs;
  onnx::ExportOptions options;
  std::pair<int64_t, int64_t> export_at{6, 5};  // the example's batch and sequence
};

void run(const Case& c, const std::filesystem::path& dir) {
  std::cout << c.name << ": " << std::flush;
  const std::string model = (dir / (c.name + ".onnx")).string();
  onnx::export_model(*c.module, c.forward, c.inputs(c.export_at.first, c.export_at.second), model, c.options);
  c.module->eval();
  NoGradGuard no_grad;
  nlohmann::json j{{"model", model}, {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()}};
  for (auto [B, T] : {std::pair<int64_t, int64_t>{4, 9}, {2, 3}}) {  // other sizes than the export's
    const Inputs in = c.inputs(B, T);
    const Inputs out = c.forward(in);
    nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
    for (size_t i = 0; i < in.size(); ++i)
      ins.push_back(to_json(in[i], i < c.options.input_names_.size() ? c.options.input_names_[i] : "input_" + std::to_string(i)));
    for (size_t i = 0; i < out.size(); ++i) outs.push_back(to_json(out[i], "output_" + std::to_string(i)));
    j["runs"].push_back({{"inputs", ins}, {"outputs", outs}});
  }
  std::ofstream(dir / (c.name + ".json")) << j.dump();
  std::cout << "exported\n";
}

template <typename M>
onnx::FlatForward two_inputs(std::shared_ptr<M> m) {
  return [m](const Inputs& in) { return Inputs{m->forward(in[0], in[1])}; };
}

// output (B, T, H), lengths (B) -> output[b, lengths[b] - 1, :]: (B, H).
Tensor last_outputs(const Tensor& output, const Tensor& lengths) {
  const int64_t b = output.size(0), h = output.size(2);
  const Tensor at = (lengths - 1).reshape({b, 1, 1}).expand({b, 1, h});  // (B, 1, H)
  return output.gather(1, at).squeeze(1);
}

// The flagship's model over the padded batch, taking the output at each text's last token
// by gather (what a PyTorch script that keeps its lengths on the GPU writes).
Case flagship_gather(const std::string& name, int64_t hidden, std::pair<int64_t, int64_t> at, std::mt19937& rng) {
  auto m = std::make_shared<examples::SentimentLSTM>(50, 8, hidden, 4, 0.3);
  return {name, m,
          [m](const Inputs& in) {
            const Tensor out = m->lstm(m->embedding(in[0])).output;
            return Inputs{m->fc(m->dropout(last_outputs(out, in[1])))};
          },
          [&rng](int64_t B, int64_t T) { return texts(B, T, 50, rng); },
          onnx::ExportOptions().input_names({"tokens", "lengths"}), at};
}

// char_rnn's model with its initial states as inputs (L = 2).
Case char_rnn(const std::string& name, int64_t hidden, std::pair<int64_t, int64_t> at) {
  auto m = std::make_shared<examples::CharLSTM>(30, 7, hidden, 2);
  return {name, m,
          [m](const Inputs& in) {
            auto [logits, state] = m->forward(in[0], nn::RNNState{in[1], in[2]});
            return Inputs{logits, state.h, state.c};
          },
          [hidden](int64_t B, int64_t T) {
            return Inputs{randint(0, 30, {B, T}), randn({2, B, hidden}), randn({2, B, hidden})};
          },
          onnx::ExportOptions().input_names({"ids", "h0", "c0"}).dynamic_axes(
              {{0, {{0, "batch"}, {1, "sequence"}}}, {1, {{1, "batch"}}}, {2, {{1, "batch"}}}}),
          at};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_driver WORKDIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  manual_seed(37);
  std::mt19937 rng(37);
  std::vector<Case> cases;
  {
    auto m = std::make_shared<examples::SentimentLSTM>(50, 8, 12, 3, 0.3);
    cases.push_back({"flagship", m, two_inputs(m), [&rng](int64_t B, int64_t T) { return texts(B, T, 50, rng); },
                     onnx::ExportOptions().input_names({"tokens", "lengths"})});
  }
  {
    auto m = std::make_shared<examples::EmbeddingMeanClassifier>(40, 6, 4);
    cases.push_back({"embedding_mean", m, two_inputs(m),
                     [&rng](int64_t B, int64_t T) { return texts(B, T, 40, rng); },
                     onnx::ExportOptions().input_names({"tokens", "lengths"})});
  }
  cases.push_back(char_rnn("char_rnn", 11, {6, 5}));
  {
    auto m = std::make_shared<examples::TransformerClassifier>(40, 8, 2, 2, 16, 4, 0.1);
    cases.push_back({"transformer", m, two_inputs(m), [&rng](int64_t B, int64_t T) { return texts(B, T, 40, rng); },
                     onnx::ExportOptions().input_names({"tokens", "lengths"})});
  }
  {  // opset 23 (ReduceMean's axes as an input from opset 18)
    auto m = std::make_shared<examples::TransformerClassifier>(40, 8, 2, 1, 16, 4, 0.1);
    cases.push_back({"transformer_opset23", m, two_inputs(m),
                     [&rng](int64_t B, int64_t T) { return texts(B, T, 40, rng); },
                     onnx::ExportOptions().input_names({"tokens", "lengths"}).opset(23)});
  }
  cases.push_back(flagship_gather("flagship_gather", 12, {6, 5}, rng));
  {
    auto m = std::make_shared<MixedImpl>();
    cases.push_back({"mixed_ops", m, [m](const Inputs& in) { return Inputs{m->forward(in[0])}; },
                     [](int64_t B, int64_t T) { return Inputs{randn({B, T, 5})}; }, onnx::ExportOptions()});
  }
  // Example sizes that coincide (Note [size provenance] in onnx/sizes.h): batch == sequence, a
  // hidden size equal to the batch, the 3 of a q/k/v split equal to both, size-1 axes.
  {
    auto m = std::make_shared<examples::SentimentLSTM>(50, 8, 12, 3, 0.3);
    cases.push_back({"flagship_batch_eq_sequence", m, two_inputs(m),
                     [&rng](int64_t B, int64_t T) { return texts(B, T, 50, rng); },
                     onnx::ExportOptions().input_names({"tokens", "lengths"}), {5, 5}});
  }
  cases.push_back(flagship_gather("flagship_gather_hidden_eq_batch", 6, {6, 5}, rng));  // hidden 6
  cases.push_back(flagship_gather("flagship_gather_batch1", 6, {1, 5}, rng));
  cases.push_back(flagship_gather("flagship_gather_sequence1", 6, {6, 1}, rng));
  cases.push_back(char_rnn("char_rnn_all_sizes_equal", 6, {6, 6}));  // hidden 6 = batch = sequence
  {
    auto m = std::make_shared<ZeroStateImpl>();
    cases.push_back({"zero_state_fold_all_sizes_equal", m, [m](const Inputs& in) { return Inputs{m->forward(in[0])}; },
                     [](int64_t B, int64_t T) { return Inputs{randn({B, T, 4})}; }, onnx::ExportOptions(), {4, 4}});
  }
  {
    auto m = std::make_shared<examples::TransformerClassifier>(40, 8, 2, 1, 16, 4, 0.1);
    cases.push_back({"transformer_batch_eq_sequence", m, two_inputs(m),
                     [&rng](int64_t B, int64_t T) { return texts(B, T, 40, rng); },
                     onnx::ExportOptions().input_names({"tokens", "lengths"}), {4, 4}});
  }
  {
    auto m = std::make_shared<CausalAttentionImpl>();  // reshape (B, T, 3, 2, 2) at B = T = 3
    cases.push_back({"causal_attention_sizes_eq_3", m, [m](const Inputs& in) { return Inputs{m->forward(in[0])}; },
                     [](int64_t B, int64_t T) { return Inputs{randn({B, T, 4})}; }, onnx::ExportOptions(), {3, 3}});
  }
  for (auto at : {std::pair<int64_t, int64_t>{1, 5}, {6, 1}}) {
    auto m = std::make_shared<MixedImpl>();
    cases.push_back({"mixed_ops_" + std::string(at.first == 1 ? "batch1" : "sequence1"), m,
                     [m](const Inputs& in) { return Inputs{m->forward(in[0])}; },
                     [](int64_t B, int64_t T) { return Inputs{randn({B, T, 5})}; }, onnx::ExportOptions(), at});
  }
  for (int64_t opset : {17, 23}) {
    auto m = std::make_shared<CausalAttentionImpl>();
    cases.push_back({"causal_attention_opset" + std::to_string(opset), m,
                     [m](const Inputs& in) { return Inputs{m->forward(in[0])}; },
                     [](int64_t B, int64_t T) { return Inputs{randn({B, T, 4})}; },
                     onnx::ExportOptions().opset(opset)});
  }
  for (const char* cell : {"lstm", "rnn"}) {
    auto m = std::make_shared<examples::Forecaster>(cell, 10, 2, 3);
    cases.push_back({std::string("timeseries_") + cell, m, [m](const Inputs& in) { return Inputs{m->forward(in[0])}; },
                     [](int64_t B, int64_t T) { return Inputs{randn({B, T, 1})}; }, onnx::ExportOptions()});
  }
  // Recurrent cells, one step (decomposed): with and without states and biases.
  for (int k = 0; k < 6; ++k) {
    const char* type = k % 3 == 0 ? "LSTMCell" : k % 3 == 1 ? "GRUCell" : "RNNCell";
    const bool with_state = k < 3, bias = k != 3;
    const int64_t I = 5, H = 7;
    std::shared_ptr<nn::RNNCellBaseImpl> m;
    if (k % 3 == 0) m = nn::LSTMCell(I, H, bias).ptr();
    else if (k % 3 == 1) m = nn::GRUCell(I, H, bias).ptr();
    else m = nn::RNNCell(I, H, bias, k == 2 ? "relu" : "tanh").ptr();
    const bool lstm = k % 3 == 0;
    std::map<size_t, std::map<int64_t, std::string>> axes{{0, {{0, "batch"}}}};
    if (with_state) axes[1] = {{0, "batch"}};
    if (with_state && lstm) axes[2] = {{0, "batch"}};
    auto inputs = [=](int64_t B, int64_t) {
      Inputs in{randn({B, I})};
      if (with_state) in.push_back(randn({B, H}));
      if (with_state && lstm) in.push_back(randn({B, H}));
      return in;
    };
    auto forward = [=](const Inputs& in) {
      nn::RNNState s{in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor()};
      nn::RNNState r = m->forward(in[0], s);
      return lstm ? Inputs{r.h, r.c} : Inputs{r.h};
    };
    cases.push_back({"cell_" + std::to_string(k) + "_" + type + (with_state ? "_state" : "_zeros") +
                         (bias ? "" : "_nobias") + (k == 2 ? "_relu" : ""),
                     m, forward, inputs, onnx::ExportOptions().dynamic_axes(axes)});
  }
  // Random recurrent layers: every option Loom has.
  std::uniform_int_distribution<int> coin(0, 1);
  for (int k = 0; k < 9; ++k) {
    const char* type = k % 3 == 0 ? "LSTM" : k % 3 == 1 ? "GRU" : "RNN";
    const int64_t I = 3 + k % 4, H = 6 + k % 5, L = 1 + coin(rng);
    const bool bi = coin(rng), bf = coin(rng), packed = coin(rng), with_h0 = coin(rng), bias = k != 4;
    auto o = nn::RNNOptions(I, H).num_layers(L).bidirectional(bi).batch_first(bf).bias(bias);
    if (k == 2) o.nonlinearity("relu");
    std::shared_ptr<nn::RNNBaseImpl> m = std::string(type) == "LSTM" ? nn::LSTM(o).ptr()
                                         : std::string(type) == "GRU" ? std::shared_ptr<nn::RNNBaseImpl>(nn::GRU(o).ptr())
                                                                      : std::shared_ptr<nn::RNNBaseImpl>(nn::RNN(o).ptr());
    const bool lstm = std::string(type) == "LSTM";
    const int64_t D = bi ? 2 : 1;
    std::map<size_t, std::map<int64_t, std::string>> axes{{0, {{bf ? 0 : 1, "batch"}, {bf ? 1 : 0, "sequence"}}}};
    size_t next = 1;
    if (with_h0) axes[next++] = {{1, "batch"}};
    if (with_h0 && lstm) axes[next++] = {{1, "batch"}};
    if (packed) axes[next++] = {{0, "batch"}};
    auto inputs = [=, &rng](int64_t B, int64_t T) {
      Inputs in{bf ? randn({B, T, I}) : randn({T, B, I})};
      if (with_h0) in.push_back(randn({L * D, B, H}));
      if (with_h0 && lstm) in.push_back(randn({L * D, B, H}));
      if (packed) in.push_back(texts(B, T, 2, rng)[1]);
      return in;
    };
    auto forward = [=](const Inputs& in) {
      size_t i = 1;
      nn::RNNState s;
      if (with_h0) s.h = in[i++];
      if (with_h0 && lstm) s.c = in[i++];
      const Tensor lens = packed ? in[i] : Tensor();
      nn::RNNOutput r = m->forward(in[0], s, lens);
      Inputs out{r.output, r.h_n};
      if (lstm) out.push_back(r.c_n);
      return out;
    };
    const std::string config = std::string(type) + "_L" + std::to_string(L) + (bi ? "_bidirectional" : "") +
                               (bf ? "_batch_first" : "") + (packed ? "_packed" : "") + (with_h0 ? "_h0" : "") +
                               (bias ? "" : "_nobias") + (k == 2 ? "_relu" : "");
    cases.push_back({"random_" + std::to_string(k) + "_" + config, m, forward, inputs,
                     onnx::ExportOptions().dynamic_axes(axes)});
  }
  for (const Case& c : cases) run(c, dir);
  return 0;
}
