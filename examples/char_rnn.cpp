// A character-level language model: an LSTM reads Jane Austen's *Persuasion*
// (examples/data/persuasion.txt, see its README) one character at a time, learns to
// predict the next one, and then writes new text from a prompt — Karpathy's char-rnn, as
// a PyTorch user would write it. The last 10% of the novel is held out for validation.
//
//   ./build/cpu/examples/char_rnn                          # defaults: about two minutes
//   ./build/cpu/examples/char_rnn --prompt "Captain Wentworth" --temperature 0.5
//   ./build/cpu/examples/char_rnn --epochs 20 --hidden 512 --checkpoint persuasion.safetensors
//   ./build/cpu/examples/char_rnn --top-k 5                # sample from the 5 likeliest characters
//   ./build/cuda/examples/char_rnn --device cuda --cuda-graph  # each training step one CUDA graph
//
// Writes metrics (CSV + JSONL), the loss curves (SVG) and a summary under --out.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "amp_option.h"
#include "onnx_option.h"
#include "cuda_graph_option.h"
#include "bundled_data.h"
#include "char_rnn_model.h"
#include "profile_option.h"
#include "run_options.h"
#include "loom.h"
#include "smoke_test.h"
#include "training_loop.h"

using namespace loom;
using examples::CharLSTM;

// A Vocab token may not hold a line break, so a newline is this character in the
// vocabulary and becomes '\n' again when printed.
const std::string kNewline = "↵";

// The text's characters (UTF-8 code points), each as its own string: the tokens of a
// character-level Vocab. '\r' (of CRLF files) is dropped and a tab becomes a space; a
// malformed byte stays a token of its own, which Vocab::build rejects as not UTF-8.
std::vector<std::string> characters(const std::string& text) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    std::string c = text.substr(i, length);
    i += length;
    if (c == "\n") chars.push_back(kNewline);
    else if (c == "\t") chars.push_back(" ");
    else if (c != "\r") chars.push_back(std::move(c));
  }
  return chars;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in, DataError, path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// seq_len characters and the seq_len characters one step later, which the model predicts.
// A single window holds (T) ids; a batch of them, (B, T).
struct CharWindow {
  Tensor input, target;
};

// The non-overlapping windows of a text (ids: (N) int64); the training loader shuffles
// them, so every epoch reads the whole text in a new order of random windows.
auto window_dataset(Tensor ids, int64_t seq_len) {
  LOOM_CHECK(seq_len > 0, ValueError, "--seq-len must be positive, got ", seq_len);
  const int64_t count = (ids.size(0) - 1) / seq_len;
  LOOM_CHECK(count > 0, ValueError, "a text of ", ids.size(0), " characters is too short for --seq-len ",
             seq_len);
  return std::make_shared<data::LambdaDataset<CharWindow>>(count, [ids, seq_len](size_t i) {
    const int64_t start = static_cast<int64_t>(i) * seq_len;
    return CharWindow{ids.narrow(0, start, seq_len), ids.narrow(0, start + 1, seq_len)};
  });
}

CharWindow collate(std::vector<CharWindow> windows) {
  std::vector<Tensor> inputs, targets;
  for (CharWindow& w : windows) {
    inputs.push_back(w.input);
    targets.push_back(w.target);
  }
  return {stack(inputs), stack(targets)};  // (B, T) each
}

// Mean cross-entropy per character over a loader, without grad.
template <typename Loader>
double evaluate(Loader& loader, CharLSTM& model, Device device) {
  NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0, count = 0;
  for (CharWindow& batch : loader) {
    Tensor logits = model.forward(batch.input.to(device)).first;  // (B, T, V)
    Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}),  // (B·T, V)
                                                batch.target.to(device).reshape({-1}));  // (B·T)
    loss_sum += loss.item<double>() * double(batch.target.numel());
    count += double(batch.target.numel());
  }
  model.train();
  return loss_sum / count;
}

// The next character from the last step's logits (V): drawn with multinomial from
// softmax(logits / temperature), or, with top_k > 0, from the top_k likeliest characters
// only (top-k sampling: the long tail of unlikely ones can no longer be drawn).
int64_t next_character(const Tensor& logits, double temperature, int64_t top_k) {
  const Tensor scaled = logits / temperature;  // (V)
  if (top_k <= 0 || top_k >= scaled.size(0)) return multinomial(scaled.softmax(0), 1).item<int64_t>();
  const auto [best, at] = scaled.topk(top_k);  // (K) logits, largest first, and their characters
  return at[multinomial(best.softmax(0), 1).item<int64_t>()].item<int64_t>();
}

// The prompt and `length` characters after it, each drawn by next_character and fed back in
// while the LSTM's state carries everything read so far.
std::string sample(CharLSTM& model, const data::Vocab& vocab, const std::string& prompt, size_t length,
                   double temperature, int64_t top_k, Device device) {
  NoGradGuard no_grad;
  model.eval();
  const std::vector<int64_t> ids = vocab.encode(characters(prompt));
  auto [logits, state] = model.forward(from_vector(ids, {1, static_cast<int64_t>(ids.size())}).to(device));
  std::string text = prompt;
  for (size_t i = 0; i < length; ++i) {
    const int64_t next = next_character(logits[0][-1], temperature, top_k);
    text += vocab.token(next) == kNewline ? "\n" : vocab.token(next);
    std::tie(logits, state) = model.forward(from_vector<int64_t>({next}, {1, 1}).to(device), state);
  }
  model.train();
  return text;
}

int main(int argc, char** argv) {
  CLI::App app{"Train a character-level LSTM on a novel and sample from it"};
  std::string data_path = examples::bundled_data("persuasion.txt");
  std::string device_name = "cpu", checkpoint, prompt = "Anne";
  examples::MetricsOutput output{"runs/char_rnn"};
  examples::AmpOption amp_option;
  examples::OnnxOption onnx_option;
  examples::CudaGraphOption cuda_graph;
  examples::ProfileOption profile;
  int epochs = 10, threads = 0;
  size_t batch_size = 32, sample_length = 400, accum_steps = 1;
  int64_t seq_len = 100, embed_dim = 32, hidden = 256, layers = 1, top_k = 0;
  double lr = 3e-3, temperature = 0.8;
  uint64_t seed = 0;
  bool smoke_test = false;
  app.add_option("--data", data_path, "a UTF-8 text file");
  examples::add_training_options(app, device_name, epochs, batch_size, lr);
  app.add_option("--seq-len", seq_len, "characters per training window");
  app.add_option("--embed-dim", embed_dim);
  app.add_option("--hidden", hidden);
  app.add_option("--layers", layers);
  app.add_option("--seed", seed);
  app.add_option("--threads", threads, "threads for the math (0: all cores)");
  app.add_option("--prompt", prompt, "text the sample starts from");
  app.add_option("--sample-length", sample_length, "characters to generate");
  app.add_option("--temperature", temperature, "below 1: safer choices; above 1: wilder");
  app.add_option("--top-k", top_k, "sample only from the K likeliest characters (0: all)");
  app.add_option("--checkpoint", checkpoint, "save the weights here at the end (the vocabulary beside them)");
  output.add_to(app);
  amp_option.add_to(app);
  onnx_option.add_to(app);
  profile.add_to(app);
  cuda_graph.add_to(app);
  examples::add_accum_steps_option(app, accum_steps);
  app.add_flag("--smoke-test", smoke_test, "3 quick epochs on 40k characters; exit 1 unless the loss falls");
  CLI11_PARSE(app, argc, argv);
  if (smoke_test) {
    epochs = 3;
    sample_length = 100;
  }

  try {
    LOOM_CHECK(epochs > 0, ValueError, "--epochs must be positive, got ", epochs);
    LOOM_CHECK(!prompt.empty(), ValueError, "--prompt must not be empty");
    LOOM_CHECK(temperature > 0, ValueError, "--temperature must be positive, got ", temperature);
    LOOM_CHECK(top_k >= 0, ValueError, "--top-k must be 0 (off) or positive, got ", top_k);
    if (threads > 0) set_num_threads(threads);
    manual_seed(seed);
    const Device device(device_name);
    cuda_graph.check(device, accum_steps, /*distributed=*/false);

    // Characters -> ids; the vocabulary comes from the first 90% (training), the rest is held out.
    std::vector<std::string> chars = characters(read_text(data_path));
    if (smoke_test) chars.resize(std::min<size_t>(chars.size(), 40000));
    const auto split = static_cast<std::ptrdiff_t>(chars.size() * 9 / 10);
    const std::vector<std::string> train_chars(chars.begin(), chars.begin() + split);
    const std::vector<std::string> valid_chars(chars.begin() + split, chars.end());
    const data::Vocab vocab = data::Vocab::build({train_chars});
    auto train_set = window_dataset(from_vector(vocab.encode(train_chars)), seq_len);
    auto valid_set = window_dataset(from_vector(vocab.encode(valid_chars)), seq_len);
    std::printf("data: %s: %zu characters, vocabulary %zu: %zu train / %zu validation windows of %lld\n",
                data_path.c_str(), chars.size(), vocab.size(), train_set->size(), valid_set->size(),
                static_cast<long long>(seq_len));
    auto train_loader = data::make_data_loader(train_set, collate,
                                               data::DataLoaderOptions(batch_size).shuffle(true).seed(seed));
    auto valid_loader = data::make_data_loader(valid_set, collate, data::DataLoaderOptions(128));

    auto model = std::make_shared<CharLSTM>(vocab.size(), embed_dim, hidden, layers);
    model->to(device);
    optim::Adam optimizer(model->parameters(), optim::AdamOptions(lr).capturable(cuda_graph.capturable(device)));
    amp::GradScaler scaler({.enabled = amp_option.needs_scaler()});
    optim::CosineAnnealingLR scheduler(optimizer, epochs);

    train::MetricsLog log(output.dir, "char_rnn");
    output.attach(log);
    train::RunSummary summary;
    const train::GradientAccumulation accumulation(accum_steps, train_loader.size());
    examples::TrainingLoop loop({.optimizer = optimizer, .scaler = scaler, .parameters = model->parameters(),
                                 .max_norm = 1.0, .amp = amp_option, .device = device, .cuda_graph = cuda_graph,
                                 .accumulation = accumulation, .log = &log, .item_name = "chars"},
                                [&](const std::vector<Tensor>& in, bool) -> std::vector<Tensor> {  // (B, T) each
                                  Tensor logits = model->forward(in[0]).first;                   // (B, T, V)
                                  return {nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}),
                                                                        in[1].reshape({-1}))};   // over B·T
                                });
    std::unique_ptr<profiler::Profile> prof = profile.start();
    double valid_loss = 0;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      summary.start_epoch();
      loop.start_epoch(epoch, epochs);
      for (CharWindow& cpu_batch : train_loader) {
        loop.step({cpu_batch.input.to(device), cpu_batch.target.to(device)}, double(cpu_batch.target.numel()));
        examples::profile_step(prof);
      }
      const examples::EpochTotals totals = loop.finish_epoch();
      scheduler.step();
      summary.end_epoch(static_cast<size_t>(totals.seen));

      valid_loss = evaluate(valid_loader, *model, device);
      log.log_epoch(epoch + 1, {{"train_loss", totals.mean(0)}, {"valid_loss", valid_loss},
                                {"valid_perplexity", std::exp(valid_loss)}});
      std::printf("epoch %d: train loss %.4f | validation loss %.4f, perplexity %.2f\n", epoch + 1,
                  totals.mean(0), valid_loss, std::exp(valid_loss));
    }

    for (const std::string& file : train::write_training_curves(output.dir + "/char_rnn", log))
      std::printf("wrote %s\n", file.c_str());
    if (!checkpoint.empty()) {
      optim::save_weights(checkpoint, *model);
      vocab.save(checkpoint + ".vocab.txt");
      std::printf("wrote %s and %s.vocab.txt\n", checkpoint.c_str(), checkpoint.c_str());
    }
    summary.set("valid_loss", valid_loss);
    summary.set("valid_perplexity", std::exp(valid_loss));
    summary.record_device_peak(device);
    std::printf("%s", summary.format("chars").c_str());
    std::printf("sample (temperature %.2f%s):\n%s\n", temperature,
                top_k > 0 ? (", top-k " + std::to_string(top_k)).c_str() : "",
                sample(*model, vocab, prompt, sample_length, temperature, top_k, device).c_str());
    // ids (3, 7) -> logits, h_n, c_n, from zero states
    onnx_option.export_model<1>(model, {randint(0, int64_t(vocab.size()), {3, 7}).to(device)}, {"ids"});
    if (smoke_test && !examples::loss_fell(log)) return 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "char_rnn: %s\n", e.what());
    return 2;
  }
  return 0;
}
