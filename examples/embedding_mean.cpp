// The smallest useful text classifier: Embedding -> mean over the words -> Linear (a
// "bag of embeddings", as nn.EmbeddingBag(mode="mean") + nn.Linear in PyTorch), on the
// same movie-review sentences as text_classification. A baseline for the LSTM: no word
// order, a few seconds per epoch.
//
//   ./build/cpu/examples/embedding_mean [--epochs 10] [--data file.tsv | aclImdb/]
#include <CLI/CLI.hpp>
#include <cstdio>

#include "amp_option.h"
#include "keep_best.h"
#include "loom.h"
#include "text_task.h"

using namespace loom;

struct TextClassifier : nn::Module {
  TextClassifier(int64_t vocab, int64_t dim, int64_t classes)
      : embedding(register_module("embedding", nn::Embedding(nn::EmbeddingOptions(vocab, dim).padding_idx(0)))),
        fc(register_module("fc", nn::Linear(dim, classes))) {}

  Tensor forward(const Tensor& tokens, const Tensor& lengths) {  // (B, T) int64, (B)
    // <pad> embeds to zeros, so the sum over T is the sum over each text's own words.
    // (lengths stay on the CPU in a TextBatch, for the recurrent layers: move them here.)
    Tensor mean = embedding(tokens).sum(1) / lengths.unsqueeze(1).to(tokens.device(), kFloat32);  // (B, dim)
    return fc(mean);
  }

  nn::Embedding embedding;
  nn::Linear fc;
};

int main(int argc, char** argv) {
  CLI::App app{"Train an embedding-mean text classifier"};
  examples::TextTaskOptions data_options;
  data_options.path = LOOM_EXAMPLES_DATA_DIR "/movie_snippets.tsv";
  std::string device_name = "cpu", out_dir = "runs/embedding_mean";
  std::string tensorboard_dir;  // --tensorboard: empty for none
  examples::KeepBestOptions keep_best;
  examples::AmpOption amp_option;
  int epochs = 10, threads = 0;
  size_t batch_size = 32, workers = 2, dim = 64, accum_steps = 1;
  double lr = 5e-3;
  bool smoke_test = false;
  app.add_option("--data", data_options.path, "label<TAB>text file (.tsv), CSV file, or aclImdb directory");
  app.add_option("--device", device_name, "cpu or cuda");
  app.add_option("--epochs", epochs);
  app.add_option("--batch-size", batch_size);
  app.add_option("--lr", lr);
  app.add_option("--dim", dim, "embedding size");
  app.add_option("--seed", data_options.seed);
  app.add_option("--train-limit", data_options.train_limit, "train on the first N training texts only");
  app.add_option("--workers", workers, "DataLoader worker threads");
  app.add_option("--threads", threads, "threads for the math (0: all cores)");
  app.add_option("--out", out_dir, "folder for metrics, curves and the summary");
  app.add_option("--tensorboard", tensorboard_dir, "also write the metrics as TensorBoard event files here");
  amp_option.add_to(app);
  app.add_option("--accum-steps", accum_steps, "micro-batches per optimizer step (gradient accumulation)")
      ->check(CLI::PositiveNumber);
  keep_best.add_to(app);
  app.add_flag("--smoke-test", smoke_test, "a few quick epochs on 512 texts; exit 1 unless the loss falls");
  CLI11_PARSE(app, argc, argv);
  if (smoke_test) {
    data_options.train_limit = 512;
    epochs = 4;
  }

  try {
    if (threads > 0) set_num_threads(threads);
    manual_seed(data_options.seed);
    const Device device(device_name);
    examples::TextTask task = examples::load_text_task(data_options);
    auto train_loader = examples::text_loader(task.train, batch_size, true, data_options.seed, workers, device.is_cuda());
    auto test_loader = examples::text_loader(task.test, 256, false, 0, workers, device.is_cuda());

    auto model = std::make_shared<TextClassifier>(task.vocab.size(), dim, task.labels.size());
    model->to(device);
    optim::AdamW optimizer(model->parameters(), lr);
    amp::GradScaler scaler({.enabled = amp_option.needs_scaler()});

    train::MetricsLog log(out_dir, "embedding_mean");
    if (!tensorboard_dir.empty()) log.write_tensorboard(tensorboard_dir);
    train::RunSummary summary;
    examples::Evaluation test{};
    const train::GradientAccumulation accumulation(accum_steps, train_loader.size());
    train::EarlyStopping stopper = keep_best.stopper();
    for (int epoch = 0; epoch < epochs && !stopper.should_stop(); ++epoch) {
      summary.start_epoch();
      double loss_sum = 0, seen = 0;
      size_t tokens = 0, micro_batch = 0;
      for (data::TextBatch& cpu_batch : train_loader) {
        data::TextBatch batch = cpu_batch.to(device, /*non_blocking=*/true);  // pinned on a GPU run
        if (accumulation.starts_step(micro_batch)) optimizer.zero_grad();
        Tensor loss;
        {
          auto autocast = amp_option.guard(device);
          loss = nn::functional::cross_entropy(model->forward(batch.tokens, batch.lengths), batch.labels);
        }
        scaler.scale(loss * accumulation.loss_factor(micro_batch)).backward();
        if (accumulation.ends_step(micro_batch)) {
          scaler.step(optimizer);
          scaler.update();
        }
        ++micro_batch;
        const double n = static_cast<double>(batch.labels.size(0));
        loss_sum += loss.item<double>() * n;
        seen += n;
        tokens += static_cast<size_t>(batch.lengths.sum().item<int64_t>());
      }
      summary.end_epoch(tokens);
      test = examples::evaluate(test_loader, *model, device);
      log.log_epoch(epoch + 1, {{"train_loss", loss_sum / seen}, {"test_loss", test.loss},
                                {"test_acc", test.accuracy}});
      std::printf("epoch %d: train loss %.4f | held-out loss %.4f acc %.4f\n", epoch + 1,
                  loss_sum / seen, test.loss, test.accuracy);
      if (stopper.step(keep_best.monitored(test)) && !keep_best.path.empty())
        optim::save_checkpoint(keep_best.path, {model.get(), &optimizer, nullptr, 0, epoch + 1});
      examples::report_early_stop(keep_best, stopper);
    }
    test = examples::reload_best(keep_best, stopper, test_loader, *model, device, test);

    train::write_training_curves(out_dir + "/embedding_mean", log);
    summary.set("test_accuracy", test.accuracy);
    summary.record_device_peak(device);
    std::printf("%s", summary.format("tokens").c_str());
    std::printf("held-out accuracy: %.4f (%zu texts)\n", test.accuracy, task.test->size());
    if (smoke_test && !examples::loss_fell(log)) return 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "embedding_mean: %s\n", e.what());
    return 2;
  }
  return 0;
}
