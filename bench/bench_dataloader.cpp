// DataLoader throughput on the bundled text data, and how much of a training step waits
// for data. JSON lines (bench/bench_util.h):
//   "dataloader_throughput": samples/s of loading + collating an epoch, no model
//   "dataloader_wait_share": the fraction of a training step (the flagship's LSTM at
//                            batch 32) spent waiting for the next batch; goal < 5 % with 2 workers
// Both for 0 and 2 workers, and for two datasets: "pretokenized" (TextClassificationDataset
// encodes every text once, up front) and "on_the_fly" (get(i) tokenizes and encodes text i
// each time, as a dataset too big to pre-encode would), where the workers earn their keep.
//
//   ./build/cpu/bench/bench_dataloader [--threads N] [--quick]
#include <chrono>
#include <cstdio>

#include "bench/bench_util.h"
#include "loom.h"

using namespace loom;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

data::TextBatch collate(std::vector<data::TextExample> examples) { return data::collate_text(std::move(examples)); }

struct Model : nn::Module {  // the flagship's shape: Embedding(V, 64) -> LSTM(64 -> 128) -> Linear
  explicit Model(int64_t vocab)
      : embedding(register_module("embedding", nn::Embedding(vocab, 64))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(64, 128).batch_first(true)))),
        fc(register_module("fc", nn::Linear(128, 2))) {}
  Tensor forward(const Tensor& tokens, const Tensor& lengths) {
    return fc(lstm(embedding(tokens), nn::RNNState{}, lengths).h_n[0]);
  }
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear fc;
};

}  // namespace

int main(int argc, char** argv) {
  const bench::Options options = bench::parse_options(argc, argv);
  if (options.threads > 0) set_num_threads(options.threads);
  const int threads = get_num_threads();

  auto records = data::read_tsv(LOOM_EXAMPLES_DATA_DIR "/movie_snippets.tsv");
  const data::Vocab vocab = data::Vocab::build(data::tokenize_texts(records), 2);
  auto dataset = std::make_shared<data::TextClassificationDataset>(records, vocab,
                                                                   data::LabelSet::from(records), 64);
  const int64_t n = static_cast<int64_t>(dataset->size());
  const data::LabelSet labels = data::LabelSet::from(records);
  auto on_the_fly = std::make_shared<data::LambdaDataset<data::TextExample>>(records.size(), [&](size_t i) {
    std::vector<int64_t> ids = vocab.encode(records[i].text);
    if (ids.size() > 64) ids.resize(64);
    if (ids.empty()) ids.push_back(data::Vocab::kUnk);
    return data::TextExample{std::move(ids), labels.id(records[i].label)};
  });

  for (auto [mode, ds] : {std::pair<const char*, std::shared_ptr<const data::Dataset<data::TextExample>>>{"pretokenized", dataset},
                          {"on_the_fly", on_the_fly}})
  for (size_t workers : {0, 2}) {
    auto loader = data::DataLoader<data::TextExample, data::TextBatch>(ds, collate,
                                         data::DataLoaderOptions(32).shuffle(true).num_workers(workers));
    const double s = bench::median_seconds([&] {
      for (data::TextBatch& batch : loader) (void)batch;
    }, 1, options.quick ? 3 : 7);
    char extra[96];
    std::snprintf(extra, sizeof extra, ",\"workers\":%zu,\"dataset\":\"%s\"", workers, mode);
    bench::print({"dataloader_throughput", "loom", n, "int64", threads, double(n) / s, "samples/s", 0, extra});
  }

  for (auto [mode, ds] : {std::pair<const char*, std::shared_ptr<const data::Dataset<data::TextExample>>>{"pretokenized", dataset},
                          {"on_the_fly", on_the_fly}})
  for (size_t workers : {0, 2}) {
    manual_seed(0);
    Model model(static_cast<int64_t>(vocab.size()));
    optim::Adam optimizer(model.parameters(), 1e-3);
    auto loader = data::DataLoader<data::TextExample, data::TextBatch>(ds, collate,
                                         data::DataLoaderOptions(32).shuffle(true).num_workers(workers));
    const size_t steps = options.quick ? 20 : 120;
    double waiting = 0;
    const auto start = Clock::now();
    auto wait_start = Clock::now();
    auto it = loader.begin();  // waits for the first batch too
    for (size_t step = 0; step < steps && it != loader.end(); ++step) {
      waiting += seconds_since(wait_start);
      data::TextBatch& batch = *it;
      optimizer.zero_grad();
      nn::functional::cross_entropy(model.forward(batch.tokens, batch.lengths), batch.labels).backward();
      optimizer.step();
      wait_start = Clock::now();
      ++it;  // takes the next batch: ready at once when the workers kept up
    }
    const double total = seconds_since(start);
    char extra[160];
    std::snprintf(extra, sizeof extra, ",\"workers\":%zu,\"dataset\":\"%s\",\"steps\":%zu,\"ms_per_step\":%.3f",
                  workers, mode, steps, 1e3 * total / double(steps));
    bench::print({"dataloader_wait_share", "loom", 32, "int64", threads, waiting / total, "fraction", 0, extra});
  }
}
