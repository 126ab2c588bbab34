// nn::RNN (tanh, relu), nn::LSTM, nn::GRU, the cells and pad_sequence against PyTorch
// (fixtures written by tests/golden/make_rnn_golden.py: outputs, final states and every
// gradient to 1e-5 in float32, packed-sequence lengths included), parameter names and
// order, float64 gradcheck, dropout between layers, and the errors.
#include <algorithm>
#include <memory>
#include <sstream>

#include "core/safetensors.h"
#include "nn/rnn.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

const std::vector<std::string> kModes{"rnn_tanh", "rnn_relu", "lstm", "gru"};
const std::vector<std::string> kLayerCases{"uni_l2",        "bi_l2",          "uni_l1_nostate",
                                           "bi_l2_batch_first", "uni_l1_nobias", "uni_l2_lengths",
                                           "bi_l2_lengths", "bi_l1_lengths_batch_first_nostate"};

// ---- fixtures ------------------------------------------------------------------------------------

struct Golden {
  std::string name;
  SafetensorsFile file;

  bool has(const std::string& key) const { return file.tensors.count(key) != 0; }
  Tensor get(const std::string& key) const {  // undefined if absent
    auto it = file.tensors.find(key);
    return it == file.tensors.end() ? Tensor() : it->second;
  }
  Tensor at(const std::string& key) const {
    INFO(name << ": tensor " << key);
    REQUIRE(has(key));
    return get(key);
  }
  std::string meta(const std::string& key) const {
    INFO(name << ": metadata " << key);
    REQUIRE(file.metadata.count(key) == 1);
    return file.metadata.at(key);
  }
  int64_t meta_int(const std::string& key) const { return std::stoll(meta(key)); }
  std::vector<std::string> param_names() const {
    std::vector<std::string> out;
    std::stringstream ss(meta("param_names"));
    for (std::string s; std::getline(ss, s, ',');) out.push_back(s);
    return out;
  }
  nn::StateDict state_dict() const {
    nn::StateDict sd;
    for (const std::string& n : param_names()) sd[n] = at("param." + n);
    return sd;
  }
};

Golden load_golden(const std::string& name) {
  return {name, golden_file(name)};
}

// |actual - expected| <= 1e-5 + 1e-5 |expected| elementwise (float32 against PyTorch).
void check_matches(const Tensor& actual, const Tensor& expected, const std::string& what) {
  INFO(what);
  REQUIRE(actual.defined());
  REQUIRE(shape_str(actual.sizes()) == shape_str(expected.sizes()));
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - e[i]) > 1e-5 + 1e-5 * std::abs(e[i]))
      FAIL(what << " element " << i << ": got " << a[i] << ", PyTorch " << e[i]);
  }
}

void check_names(const nn::Module& m, const std::vector<std::string>& expected) {
  std::vector<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.push_back(name);
  CHECK(names == expected);
}

// How a fixture's inputs are fed: as stored (float32), as non-contiguous views of the same
// values, or converted to float64 (the module too).
enum class Feed { Float32, NonContiguous, Float64 };
const std::vector<std::pair<Feed, std::string>> kFeeds{
    {Feed::Float32, "float32"}, {Feed::NonContiguous, "non-contiguous"}, {Feed::Float64, "float64"}};

// A leaf requiring grad and the tensor given to the module (a transposed view of the leaf
// for NonContiguous); undefined where the fixture has no such input.
struct Arg {
  Tensor leaf, used;
  bool transposed = false;
  Tensor grad() const { return transposed ? leaf.grad().transpose(0, -1) : leaf.grad(); }  // fixture layout
};

Arg make_arg(const Tensor& value, Feed feed) {
  if (!value.defined()) return {};
  if (feed == Feed::NonContiguous) {
    Tensor leaf = value.transpose(0, -1).contiguous().requires_grad_(true);
    Tensor used = leaf.transpose(0, -1);
    REQUIRE_FALSE(used.is_contiguous());
    return {leaf, used, true};
  }
  Tensor leaf = (feed == Feed::Float64 ? value.to(kFloat64) : value.clone()).requires_grad_(true);
  return {leaf, leaf};
}

// The loss of the fixtures: Σ output·w_output + Σ h_n·w_h_n (+ Σ c_n·w_c_n).
Tensor weighted_loss(const Golden& g, const Tensor& output, const Tensor& h_n, const Tensor& c_n) {
  auto term = [&](const Tensor& t, const std::string& w) { return (t * g.at(w).to(t.dtype())).sum(); };
  Tensor loss = term(h_n, "w_h_n");
  if (output.defined()) loss = loss + term(output, "w_output");
  if (c_n.defined()) loss = loss + term(c_n, "w_c_n");
  return loss;
}

void check_grads(const Golden& g, const nn::Module& m, const Arg& x, const Arg& h0, const Arg& c0) {
  check_matches(x.grad(), g.at("grad.input"), g.name + " grad input");
  if (h0.leaf.defined()) check_matches(h0.grad(), g.at("grad.h0"), g.name + " grad h0");
  if (c0.leaf.defined()) check_matches(c0.grad(), g.at("grad.c0"), g.name + " grad c0");
  for (const auto& [name, p] : m.named_parameters())
    check_matches(p.grad(), g.at("grad.param." + name), g.name + " grad " + name);
}

// ---- building modules --------------------------------------------------------------------------------

std::shared_ptr<nn::RNNBaseImpl> make_layer(const std::string& mode, nn::RNNOptions o) {
  if (mode == "lstm") return std::make_shared<nn::LSTMImpl>(o);
  if (mode == "gru") return std::make_shared<nn::GRUImpl>(o);
  return std::make_shared<nn::RNNImpl>(o.nonlinearity(mode == "rnn_relu" ? "relu" : "tanh"));
}

nn::RNNOptions golden_options(const Golden& g) {
  return nn::RNNOptions(g.meta_int("input_size"), g.meta_int("hidden_size"))
      .num_layers(g.meta_int("num_layers"))
      .bidirectional(g.meta_int("bidirectional") != 0)
      .batch_first(g.meta_int("batch_first") != 0)
      .bias(g.meta_int("bias") != 0);
}

std::shared_ptr<nn::RNNCellBaseImpl> make_cell(const std::string& mode, int64_t I, int64_t H, bool bias) {
  if (mode == "lstm") return std::make_shared<nn::LSTMCellImpl>(I, H, bias);
  if (mode == "gru") return std::make_shared<nn::GRUCellImpl>(I, H, bias);
  return std::make_shared<nn::RNNCellImpl>(I, H, bias, mode == "rnn_relu" ? "relu" : "tanh");
}

// One step through the cell's own handle type: h' and, for LSTMCell, c'.
nn::RNNState cell_step(const std::string& mode, const std::shared_ptr<nn::RNNCellBaseImpl>& m, const Tensor& x,
                       const Tensor& h, const Tensor& c) {
  if (mode == "lstm") return nn::LSTMCell(std::static_pointer_cast<nn::LSTMCellImpl>(m))(x, nn::RNNState{h, c});
  if (mode == "gru") return {nn::GRUCell(std::static_pointer_cast<nn::GRUCellImpl>(m))(x, h), Tensor()};
  return {nn::RNNCell(std::static_pointer_cast<nn::RNNCellImpl>(m))(x, h), Tensor()};
}

// The results of a layer as one vector, for gradcheck's Jacobian (with_output false: the
// final states only, so that no gradient flows into the last layer's output).
Tensor flat_outputs(const nn::RNNOutput& r, bool with_output) {
  std::vector<Tensor> parts{r.h_n.flatten()};
  if (with_output) parts.push_back(r.output.flatten());
  if (r.c_n.defined()) parts.push_back(r.c_n.flatten());
  return cat(parts, 0);
}

// ---- plain-loop reference (double) ---------------------------------------------------------------------

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// One cell step for one batch row: gi, gh are the input and recurrent projections with
// their biases (G·H each); h, c are updated in place.
void reference_cell(const std::string& mode, const std::vector<double>& gi, const std::vector<double>& gh,
                    std::vector<double>& h, std::vector<double>& c) {
  const size_t H = h.size();
  for (size_t k = 0; k < H; ++k) {
    if (mode == "lstm") {
      const double i = sigmoid(gi[k] + gh[k]), f = sigmoid(gi[H + k] + gh[H + k]);
      const double g = std::tanh(gi[2 * H + k] + gh[2 * H + k]), o = sigmoid(gi[3 * H + k] + gh[3 * H + k]);
      c[k] = f * c[k] + i * g;
      h[k] = o * std::tanh(c[k]);
    } else if (mode == "gru") {
      const double r = sigmoid(gi[k] + gh[k]), z = sigmoid(gi[H + k] + gh[H + k]);
      const double n = std::tanh(gi[2 * H + k] + r * gh[2 * H + k]);
      h[k] = (1 - z) * n + z * h[k];
    } else {
      const double pre = gi[k] + gh[k];
      h[k] = mode == "rnn_relu" ? std::max(pre, 0.0) : std::tanh(pre);
    }
  }
}

// y (rows) = W (rows, cols) · v (cols) + bias.
std::vector<double> affine(const std::vector<double>& W, const std::vector<double>* bias, const double* v,
                           size_t cols) {
  const size_t rows = W.size() / cols;
  std::vector<double> y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double acc = bias ? (*bias)[r] : 0.0;
    for (size_t j = 0; j < cols; ++j) acc += W[r * cols + j] * v[j];
    y[r] = acc;
  }
  return y;
}

struct ReferenceOutput {
  std::vector<double> output, h_n, c_n;  // (T, B, D·H), (L·D, B, H), (L·D, B, H)
};

// The stacked layers of m (time-major x (T, B, I)) with packed-sequence lengths.
ReferenceOutput reference_rnn(const std::string& mode, const nn::RNNBaseImpl& m, const Tensor& x, const Tensor& h0,
                              const Tensor& c0, const std::vector<int64_t>& lengths) {
  const nn::RNNOptions& o = m.options;
  const size_t T = size_t(x.size(0)), B = size_t(x.size(1)), H = size_t(o.hidden_size_);
  const size_t D = o.bidirectional_ ? 2 : 1, L = size_t(o.num_layers_);
  const nn::StateDict params = m.state_dict();
  std::vector<double> input = values(x), h0v = values(h0), c0v = c0.defined() ? values(c0) : h0v;
  size_t in = size_t(o.input_size_);
  ReferenceOutput out;
  out.h_n.resize(L * D * B * H);
  out.c_n.resize(L * D * B * H);
  for (size_t layer = 0; layer < L; ++layer) {
    std::vector<double> y(T * B * D * H, 0.0);
    for (size_t dir = 0; dir < D; ++dir) {
      const std::string suffix = "_l" + std::to_string(layer) + (dir ? "_reverse" : "");
      auto param = [&](const std::string& name) {
        auto it = params.find(name + suffix);
        return it == params.end() ? std::vector<double>() : values(it->second);
      };
      const std::vector<double> w_ih = param("weight_ih"), w_hh = param("weight_hh");
      const std::vector<double> b_ih = param("bias_ih"), b_hh = param("bias_hh");
      const size_t k = layer * D + dir;
      for (size_t b = 0; b < B; ++b) {
        std::vector<double> h(h0v.begin() + long((k * B + b) * H), h0v.begin() + long((k * B + b + 1) * H));
        std::vector<double> c(c0v.begin() + long((k * B + b) * H), c0v.begin() + long((k * B + b + 1) * H));
        const size_t len = lengths.empty() ? T : size_t(lengths[b]);
        for (size_t s = 0; s < len; ++s) {
          const size_t t = dir ? len - 1 - s : s;  // a reverse direction starts at the row's last step
          const std::vector<double> gi = affine(w_ih, b_ih.empty() ? nullptr : &b_ih, &input[(t * B + b) * in], in);
          const std::vector<double> gh = affine(w_hh, b_hh.empty() ? nullptr : &b_hh, h.data(), H);
          reference_cell(mode, gi, gh, h, c);
          std::copy(h.begin(), h.end(), y.begin() + long((t * B + b) * D * H + dir * H));
        }
        std::copy(h.begin(), h.end(), out.h_n.begin() + long((k * B + b) * H));
        std::copy(c.begin(), c.end(), out.c_n.begin() + long((k * B + b) * H));
      }
    }
    input = y;
    in = D * H;
  }
  out.output = input;
  return out;
}

}  // namespace

// ---- against PyTorch ----------------------------------------------------------------------------------

TEST_CASE("RNN/LSTM/GRU match PyTorch: outputs, final states, all gradients", "[rnn]") {
  for (const std::string& mode : kModes) {
    for (const std::string& c : kLayerCases) {
      const Golden g = load_golden("rnn_" + mode + "_" + c);
      for (const auto& [feed, feed_name] : kFeeds) {
        SECTION(g.name + " " + feed_name) {
          REQUIRE(g.meta("mode") == mode);
          std::shared_ptr<nn::RNNBaseImpl> m = make_layer(mode, golden_options(g));
          check_names(*m, g.param_names());  // PyTorch's state_dict keys, in its order
          m->load_state_dict(g.state_dict());
          if (feed == Feed::Float64) m->to(kFloat64);

          const Arg x = make_arg(g.at("input"), feed), h0 = make_arg(g.get("h0"), feed),
                    c0 = make_arg(g.get("c0"), feed);
          nn::RNNOutput r = m->forward(x.used, {h0.used, c0.used}, g.get("lengths"));
          check_matches(r.output, g.at("output"), g.name + " output");
          check_matches(r.h_n, g.at("h_n"), g.name + " h_n");
          if (mode == "lstm") check_matches(r.c_n, g.at("c_n"), g.name + " c_n");
          else CHECK_FALSE(r.c_n.defined());

          weighted_loss(g, r.output, r.h_n, r.c_n).backward();
          check_grads(g, *m, x, h0, c0);
        }
      }
    }
  }
}

TEST_CASE("RNN with int32 lengths through the call operator", "[rnn]") {
  const Golden g = load_golden("rnn_gru_bi_l1_lengths_batch_first_nostate");
  nn::GRU gru(golden_options(g));
  gru->load_state_dict(g.state_dict());
  nn::RNNOutput r = gru(g.at("input"), nn::RNNState{}, g.at("lengths").to(kInt32));
  check_matches(r.output, g.at("output"), "output");
  check_matches(r.h_n, g.at("h_n"), "h_n");
}

TEST_CASE("RNNCell/LSTMCell/GRUCell match PyTorch", "[rnn]") {
  for (const std::string& mode : kModes) {
    for (const std::string& variant : {"", "_nostate", "_nobias"}) {
      const Golden g = load_golden("rnncell_" + mode + variant);
      for (const auto& [feed, feed_name] : kFeeds) {
        SECTION(g.name + " " + feed_name) {
          auto m = make_cell(mode, g.meta_int("input_size"), g.meta_int("hidden_size"), g.meta_int("bias") != 0);
          check_names(*m, g.param_names());
          m->load_state_dict(g.state_dict());
          if (feed == Feed::Float64) m->to(kFloat64);
          const Arg x = make_arg(g.at("input"), feed), h = make_arg(g.get("h0"), feed),
                    c = make_arg(g.get("c0"), feed);
          nn::RNNState out = cell_step(mode, m, x.used, h.used, c.used);
          check_matches(out.h, g.at("h_n"), g.name + " h'");
          if (mode == "lstm") check_matches(out.c, g.at("c_n"), g.name + " c'");
          else CHECK_FALSE(out.c.defined());
          weighted_loss(g, Tensor(), out.h, out.c).backward();
          check_grads(g, *m, x, h, c);
        }
      }
    }
  }
}

TEST_CASE("pad_sequence matches PyTorch, forward and backward", "[rnn]") {
  const Golden g = load_golden("rnn_pad_sequence");
  const double padding = std::stod(g.meta("padding_value"));
  for (const bool batch_first : {false, true}) {
    const std::string key = batch_first ? "batch_first" : "time_first";
    std::vector<Tensor> seqs;
    for (int64_t i = 0; i < g.meta_int("num_sequences"); ++i)
      seqs.push_back(make_arg(g.at("seq" + std::to_string(i)), Feed::Float32).leaf);
    Tensor out = nn::pad_sequence(seqs, batch_first, padding);
    check_matches(out, g.at(key + ".output"), key + " output");
    (out * g.at(key + ".w")).sum().backward();
    for (size_t i = 0; i < seqs.size(); ++i)
      check_matches(seqs[i].grad(), g.at(key + ".grad.seq" + std::to_string(i)), key + " grad seq" + std::to_string(i));
  }
  // Non-contiguous sequences give the same result.
  std::vector<Tensor> transposed;
  for (int64_t i = 0; i < g.meta_int("num_sequences"); ++i)
    transposed.push_back(g.at("seq" + std::to_string(i)).transpose(1, 2).contiguous().transpose(1, 2));
  check_matches(nn::pad_sequence(transposed, true, padding), g.at("batch_first.output"), "non-contiguous");
}

// ---- larger sizes (the parallel paths) ----------------------------------------------------------------------

namespace {
// A batch that the kernels split across threads (and GEMMs of a few hundred rows).
constexpr int64_t kBigT = 4, kBigB = 130, kBigI = 12, kBigH = 32;

// Sets the number of CPU threads for its lifetime.
struct ThreadsGuard {
  explicit ThreadsGuard(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(saved); }
  int saved;
};

std::vector<int64_t> big_lengths() {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < kBigB; ++b) v.push_back(1 + (b * 7) % kBigT);
  return v;
}
}  // namespace

TEST_CASE("RNN/LSTM/GRU forward against a plain-loop reference at a larger size", "[rnn]") {
  manual_seed(5);
  for (const std::string& mode : kModes) {
    for (const DType dt : {kFloat32, kFloat64}) {
      SECTION(mode + " " + dtype_name(dt)) {
        auto m = make_layer(mode, nn::RNNOptions(kBigI, kBigH).num_layers(2).bidirectional(true));
        m->to(dt);
        const Tensor x = random_nonzero({kBigT, kBigB, kBigI}, dt, -1, 1);
        const Tensor h0 = random_nonzero({4, kBigB, kBigH}, dt, -1, 1);
        const Tensor c0 = mode == "lstm" ? random_nonzero({4, kBigB, kBigH}, dt, -1, 1) : Tensor();
        const std::vector<int64_t> lens = big_lengths();
        const nn::RNNOutput r = m->forward(x, {h0, c0}, from_vector(lens));
        const ReferenceOutput ref = reference_rnn(mode, *m, x, h0, c0, lens);
        check_close(r.output, ref.output, dt, "output");
        check_close(r.h_n, ref.h_n, dt, "h_n");
        if (mode == "lstm") check_close(r.c_n, ref.c_n, dt, "c_n");
        // Without lengths too.
        const nn::RNNOutput full = m->forward(x, {h0, c0});
        check_close(full.output, reference_rnn(mode, *m, x, h0, c0, {}).output, dt, "output without lengths");
      }
    }
  }
}

TEST_CASE("RNN/LSTM/GRU backward of a large batch on all threads equals that of its chunks on one", "[rnn]") {
  manual_seed(6);
  const int64_t chunk = 26;
  for (const std::string& mode : kModes) {
    SECTION(mode) {
      auto m = make_layer(mode, nn::RNNOptions(kBigI, kBigH).num_layers(2).bidirectional(true));
      m->to(kFloat64);
      const bool lstm = mode == "lstm";
      const Tensor x = random_nonzero({kBigT, kBigB, kBigI}, kFloat64, -1, 1);
      const Tensor h0 = random_nonzero({4, kBigB, kBigH}, kFloat64, -1, 1);
      const Tensor c0 = random_nonzero({4, kBigB, kBigH}, kFloat64, -1, 1);
      const Tensor w_out = random_nonzero({kBigT, kBigB, 2 * kBigH}, kFloat64);
      const Tensor w_h = random_nonzero({4, kBigB, kBigH}, kFloat64), w_c = random_nonzero({4, kBigB, kBigH}, kFloat64);
      const Tensor lengths = from_vector(big_lengths());
      // Runs rows [b, b + n) and returns the leaf gradients w.r.t. x, h0, c0.
      auto run = [&](int64_t b, int64_t n) {
        Tensor xl = x.narrow(1, b, n).clone().requires_grad_(true);
        Tensor hl = h0.narrow(1, b, n).clone().requires_grad_(true);
        Tensor cl = lstm ? c0.narrow(1, b, n).clone().requires_grad_(true) : Tensor();
        nn::RNNOutput r = m->forward(xl, {hl, cl}, lengths.narrow(0, b, n));
        Tensor loss = (r.output * w_out.narrow(1, b, n)).sum() + (r.h_n * w_h.narrow(1, b, n)).sum();
        if (lstm) loss = loss + (r.c_n * w_c.narrow(1, b, n)).sum();
        loss.backward();
        return std::vector<Tensor>{xl.grad(), hl.grad(), lstm ? cl.grad() : Tensor()};
      };
      const std::vector<Tensor> whole = run(0, kBigB);
      std::vector<Tensor> whole_params;
      for (const Tensor& p : m->parameters()) whole_params.push_back(p.grad().clone());
      m->zero_grad();
      ThreadsGuard serial(1);
      for (int64_t b = 0; b < kBigB; b += chunk) {
        const int64_t n = std::min(chunk, kBigB - b);
        const std::vector<Tensor> part = run(b, n);
        check_close(part[0], whole[0].narrow(1, b, n), "grad x");
        check_close(part[1], whole[1].narrow(1, b, n), "grad h0");
        if (lstm) check_close(part[2], whole[2].narrow(1, b, n), "grad c0");
      }
      const std::vector<Tensor> params = m->parameters();  // the chunks' gradients accumulated
      for (size_t i = 0; i < params.size(); ++i) check_close(params[i].grad(), whole_params[i], "grad param");
    }
  }
}

// ---- gradcheck -------------------------------------------------------------------------------------------

TEST_CASE("RNN/LSTM/GRU float64 gradcheck w.r.t. input, h0, c0 and every weight", "[rnn]") {
  manual_seed(7);
  struct Config {
    const char* name;
    bool bidirectional, batch_first, lengths, states_only;  // states_only: the output is unused
  };
  const Config configs[] = {{"uni batch_first", false, true, false, false},
                            {"bi lengths", true, false, true, false},
                            {"bi lengths, final states only", true, false, true, true}};
  const int64_t I = 2, H = 2, T = 3, B = 3, L = 2;
  for (const std::string& mode : kModes) {
    for (const Config& cfg : configs) {
      SECTION(mode + " " + cfg.name) {
        auto m = make_layer(mode, nn::RNNOptions(I, H).num_layers(L).bidirectional(cfg.bidirectional)
                                      .batch_first(cfg.batch_first));
        m->to(kFloat64);
        const int64_t D = cfg.bidirectional ? 2 : 1;
        Tensor x = leaf(cfg.batch_first ? Shape{B, T, I} : Shape{T, B, I}, -1, 1);
        Tensor h0 = leaf({L * D, B, H}, -1, 1);
        Tensor c0 = mode == "lstm" ? leaf({L * D, B, H}, -1, 1) : Tensor();
        Tensor lengths = cfg.lengths ? tensor<int64_t>({2, 3, 1}) : Tensor();
        std::vector<Tensor> inputs{x, h0};
        if (c0.defined()) inputs.push_back(c0);
        for (const Tensor& p : m->parameters()) inputs.push_back(p);
        // Gradcheck perturbs the parameters in place, so f reads them through the module.
        CHECK(gradcheck(
            [&](const std::vector<Tensor>&) {
              return flat_outputs(m->forward(x, {h0, c0}, lengths), !cfg.states_only);
            },
            inputs));
      }
    }
  }
}

TEST_CASE("RNN cells float64 gradcheck", "[rnn]") {
  manual_seed(8);
  for (const std::string& mode : kModes) {
    SECTION(mode) {
      Tensor x = leaf({2, 3}, -1, 1), h = leaf({2, 2}, -1, 1);
      Tensor c = mode == "lstm" ? leaf({2, 2}, -1, 1) : Tensor();
      auto m = make_cell(mode, 3, 2, true);
      m->to(kFloat64);
      std::vector<Tensor> inputs{x, h};
      if (c.defined()) inputs.push_back(c);
      for (const Tensor& p : m->parameters()) inputs.push_back(p);
      CHECK(gradcheck(
          [&](const std::vector<Tensor>&) {
            nn::RNNState s = cell_step(mode, m, x, h, c);
            return s.c.defined() ? cat({s.h.flatten(), s.c.flatten()}, 0) : s.h.flatten();
          },
          inputs));
    }
  }
}

// ---- dropout between layers -----------------------------------------------------------------------------

TEST_CASE("RNN dropout: between layers in train mode only, never after the last layer", "[rnn]") {
  manual_seed(11);
  const int64_t I = 3, H = 4, T = 5, B = 3;
  const Tensor x = random_nonzero({T, B, I});
  for (const std::string& mode : kModes) {
    for (const bool bi : {false, true}) {
      SECTION(mode + (bi ? " bi" : " uni")) {
        const int64_t D = bi ? 2 : 1;
        auto m = make_layer(mode, nn::RNNOptions(I, H).num_layers(2).bidirectional(bi).dropout(0.5));
        const Tensor h0 = random_nonzero({2 * D, B, H});
        const nn::RNNState state{h0, mode == "lstm" ? random_nonzero({2 * D, B, H}) : Tensor()};
        auto run = [&] { return m->forward(x, state); };

        nn::RNNOutput a = run(), b = run();  // training mode by default
        CHECK_FALSE(allclose(a.output, b.output));
        m->eval();
        nn::RNNOutput e1 = run(), e2 = run();
        CHECK(allclose(e1.output, e2.output, 0, 0));
        CHECK_FALSE(allclose(a.output, e1.output));
        // The first layer's final states do not see the dropout.
        CHECK(allclose(a.h_n.narrow(0, 0, D), e1.h_n.narrow(0, 0, D), 0, 0));

        // p = 1 zeroes the first layer's output, so in training the second layer sees a zero
        // input: the same as a one-layer module with its weights fed zeros (and the output
        // itself is not dropped).
        auto m1 = make_layer(mode, nn::RNNOptions(I, H).num_layers(2).bidirectional(bi).dropout(1.0));
        m1->load_state_dict(m->state_dict());
        auto top = make_layer(mode, nn::RNNOptions(D * H, H).bidirectional(bi));
        nn::StateDict top_sd;
        for (const auto& [name, t] : m->named_parameters()) {
          const auto pos = name.find("_l1");
          if (pos != std::string::npos) top_sd[name.substr(0, pos) + "_l0" + name.substr(pos + 3)] = t.detach();
        }
        top->load_state_dict(top_sd);
        nn::RNNOutput dropped = m1->forward(x, state);
        const Tensor c_top = state.c.defined() ? state.c.narrow(0, D, D) : Tensor();
        nn::RNNOutput expect = top->forward(zeros({T, B, D * H}), {h0.narrow(0, D, D), c_top});
        check_close(dropped.output, expect.output, "p = 1 output");
        check_close(dropped.h_n.narrow(0, D, D), expect.h_n, "p = 1 h_n of the last layer");
        CHECK(allclose(dropped.h_n.narrow(0, 0, D), e1.h_n.narrow(0, 0, D), 0, 0));
      }
    }
  }
  SECTION("one layer: dropout > 0 changes nothing") {
    auto m = make_layer("lstm", nn::RNNOptions(I, H).dropout(0.5));
    nn::RNNOutput train = m->forward(x);
    m->eval();
    nn::RNNOutput eval = m->forward(x);
    CHECK(allclose(train.output, eval.output, 0, 0));
    CHECK(allclose(train.h_n, eval.h_n, 0, 0));
  }
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("RNN errors name the module and the shapes", "[rnn]") {
  nn::LSTM lstm(nn::RNNOptions(4, 3).num_layers(2));
  nn::GRU gru(nn::RNNOptions(4, 3).bidirectional(true));
  nn::RNN rnn(nn::RNNOptions(4, 3).batch_first(true));
  const Tensor x = random_nonzero({5, 2, 4});  // (T, B, I)

  require_throws_with<ShapeError>([&] { lstm(random_nonzero({5, 2, 7})); },
                                  {"LSTM", "(5, 2, 7)", "feature size 7", "input_size 4"});
  require_throws_with<ShapeError>([&] { rnn(random_nonzero({5, 4})); }, {"RNN", "3-D", "(5, 4)"});
  require_throws_with<ShapeError>([&] { gru(x, nn::RNNState{random_nonzero({1, 2, 3})}); },
                                  {"GRU", "h0", "(1, 2, 3)", "(2, 2, 3)"});
  const Tensor h0 = random_nonzero({2, 2, 3});
  require_throws_with<ShapeError>([&] { lstm(x, nn::RNNState{h0, random_nonzero({2, 3, 3})}); },
                                  {"LSTM", "c0", "(2, 3, 3)", "(2, 2, 3)"});
  require_throws_with<ValueError>([&] { lstm(x, nn::RNNState{}, tensor<int64_t>({0, 3})); },
                                  {"LSTM", "length 0", "[1, 5]", "(5, 2, 4)"});
  require_throws_with<ValueError>([&] { gru(x, nn::RNNState{}, tensor<int64_t>({6, 3})); },
                                  {"GRU", "length 6", "[1, 5]", "(5, 2, 4)"});
  require_throws_with<ShapeError>([&] { lstm(x, nn::RNNState{}, tensor<int64_t>({5, 3, 2})); },
                                  {"LSTM", "lengths", "(3,)", "(5, 2, 4)", "batch size 2"});
  require_throws_with<DTypeError>([&] { gru(x, nn::RNNState{}, tensor<float>({5, 3})); }, {"GRU", "lengths", "float32"});
  // batch_first: the batch is dim 0.
  require_throws_with<ShapeError>([&] { rnn(random_nonzero({2, 5, 4}), nn::RNNState{}, tensor<int64_t>({5, 3, 1})); },
                                  {"RNN", "(3,)", "(2, 5, 4)", "batch size 2"});
  // Mixed dtypes: a float64 input or state for float32 weights.
  require_throws_with<DTypeError>([&] { lstm(x.to(kFloat64)); }, {"LSTM", "float64", "float32"});
  require_throws_with<DTypeError>([&] { gru(x, nn::RNNState{h0.to(kFloat64)}); }, {"GRU", "h0", "float64", "float32"});
  require_throws_with<DTypeError>([&] { lstm(x, nn::RNNState{h0, h0.to(kFloat64)}); },
                                  {"LSTM", "c0", "float64", "float32"});
  require_throws_with<ValueError>([&] { nn::RNN(nn::RNNOptions(4, 3).nonlinearity("sigmoid")); },
                                  {"RNN", "sigmoid"});
  require_throws_with<ValueError>([&] { nn::LSTM(nn::RNNOptions(4, 3).dropout(1.5)); }, {"LSTM", "dropout"});
}

TEST_CASE("RNN cell and pad_sequence errors", "[rnn]") {
  nn::LSTMCell lstm(4, 3);
  nn::GRUCell gru(4, 3);
  const Tensor x = random_nonzero({2, 4});
  require_throws_with<ShapeError>([&] { gru(random_nonzero({2, 5})); }, {"GRUCell", "(2, 5)", "(batch, 4)"});
  require_throws_with<ShapeError>([&] { gru(x, random_nonzero({3, 3})); }, {"GRUCell", "(3, 3)", "(2, 3)"});
  require_throws_with<ShapeError>([&] { lstm(x, nn::RNNState{random_nonzero({2, 3}), random_nonzero({2, 4})}); },
                                  {"LSTMCell", "cell state", "(2, 4)", "(2, 3)"});
  require_throws_with<DTypeError>([&] { gru(x, random_nonzero({2, 3}, kFloat64)); },
                                  {"GRUCell", "hidden state", "float64", "float32"});
  require_throws_with<DTypeError>([&] { lstm(random_nonzero({2, 4}, kFloat64)); }, {"LSTMCell", "float64", "float32"});
  require_throws_with<ShapeError>([&] { nn::pad_sequence({random_nonzero({3, 2}), random_nonzero({4, 5})}); },
                                  {"pad_sequence", "(4, 5)", "(3, 2)"});
  require_throws_with<ValueError>([&] { nn::pad_sequence({}); }, {"pad_sequence", "empty"});
}

// ---- construction ------------------------------------------------------------------------------------------

TEST_CASE("RNN modules: PyTorch's default init range and printing", "[rnn]") {
  manual_seed(3);
  nn::LSTM lstm(nn::RNNOptions(5, 16).num_layers(2));
  const double bound = 1 / std::sqrt(16.0);
  for (const auto& [name, p] : lstm->named_parameters()) {
    INFO(name);
    CHECK(p.abs().max().item<double>() <= bound);
    CHECK(p.abs().max().item<double>() > 0.9 * bound);
    CHECK(p.requires_grad());
  }
  nn::GRUCell cell(5, 16);
  CHECK(cell->weight_hh.abs().max().item<double>() <= bound);
  CHECK(cell->weight_hh.abs().max().item<double>() > 0.9 * bound);

  // PyTorch's reprs of the same modules.
  CHECK(nn::RNN(nn::RNNOptions(4, 3).nonlinearity("relu").dropout(0.5).num_layers(2).batch_first(true).bias(false)
                    .bidirectional(true))
            ->str() == "RNN(4, 3, num_layers=2, bias=False, batch_first=True, dropout=0.5, bidirectional=True)");
  CHECK(nn::GRU(nn::RNNOptions(4, 3).num_layers(2).dropout(0.25))->str() == "GRU(4, 3, num_layers=2, dropout=0.25)");
  CHECK(nn::RNNCell(4, 3, false, "relu")->str() == "RNNCell(4, 3, bias=False, nonlinearity=relu)");
  CHECK(nn::LSTMCell(4, 3)->str() == "LSTMCell(4, 3)");
}

TEST_CASE("rnn(x, h0) takes the second tensor as the initial state, as PyTorch", "[rnn]") {
  nn::GRU gru(nn::RNNOptions(4, 3).num_layers(2));
  const Tensor x = random_nonzero({5, 2, 4});
  const Tensor h0 = random_nonzero({2, 2, 3});
  const nn::RNNOutput a = gru(x, h0);
  const nn::RNNOutput b = gru(x, nn::RNNState{h0, {}});
  const nn::RNNOutput zero_state = gru(x);
  check_close(a.output, b.output);
  check_close(a.h_n, b.h_n);
  CHECK((a.h_n - zero_state.h_n).abs().max().item<double>() > 1e-4);  // h0 was used
}
