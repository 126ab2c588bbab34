// The program around a text classifier whose forward is model(tokens, lengths) -> logits:
// the options every text example takes, the training loop (AdamW, gradient accumulation,
// --amp, --keep-best/--patience), evaluation on the held-out texts, metrics, curves and the
// summary. On a GPU a training step never waits for it: the loss is summed on the device
// and read once per epoch (docs/cuda.md, "A step without host syncs"). embedding_mean and transformer_classification are each a model plus a call to
// run_text_classifier; the flagship (text_classification) spells its loop out in full.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "amp_option.h"
#include "onnx_option.h"
#include "bundled_data.h"
#include "core/cuda.h"
#include "cuda_graph_option.h"
#include "keep_best.h"
#include "loom.h"
#include "profile_option.h"
#include "run_options.h"
#include "text_task.h"
#include "training_loop.h"
#include "weights_crc32c.h"

namespace examples {

// The high-water mark of live tensor memory on `device` since the last reset_peak (Loom's
// allocator books: core/memory.h, core/cuda.h): parameters, gradients, optimizer state and
// activations together.
inline size_t peak_tensor_bytes(loom::Device device) {
  return device.is_cuda() ? loom::cuda::max_memory_allocated(device.index) : loom::cpu::max_memory_allocated();
}
inline void reset_peak(loom::Device device) {
  if (device.is_cuda()) {
    loom::cuda::reset_peak_memory_stats(device.index);
  } else {
    loom::cpu::reset_peak_memory_stats();
  }
}

struct TextClassifierProgram {
  std::string name;         // the program's name: metrics "<name>_*.csv" under runs/<name>
  std::string description;  // its --help line
  int epochs = 10;
  size_t batch_size = 32;
  double lr = 5e-3;
  double clip_norm = 0;  // > 0: clip the gradients' total norm to this before each step
};

// make_model(vocabulary size, classes) -> std::shared_ptr<Model>; add_model_options adds
// the model's own options (read by make_model after parsing).
template <typename MakeModel>
int run_text_classifier(int argc, char** argv, TextClassifierProgram p,
                        const std::function<void(CLI::App&)>& add_model_options, MakeModel make_model) {
  using namespace loom;
  CLI::App app{p.description};
  TextTaskOptions data_options;
  data_options.path = examples::bundled_data("movie_snippets.tsv");
  std::string device_name = "cpu";
  MetricsOutput output{"runs/" + p.name};
  KeepBestOptions keep_best;
  AmpOption amp_option;
  OnnxOption onnx_option;
  ProfileOption profile;
  CudaGraphOption cuda_graph;
  int threads = 0;
  size_t workers = 2, accum_steps = 1;
  bool smoke_test = false;
  bool deterministic = false;
  bool pad_to_max_length = false;
  app.add_option("--data", data_options.path, "label<TAB>text file (.tsv), CSV file, or aclImdb directory");
  add_training_options(app, device_name, p.epochs, p.batch_size, p.lr);
  add_model_options(app);
  app.add_option("--max-length", data_options.max_length, "tokens kept per text");
  app.add_flag("--pad-to-max-length", pad_to_max_length,
               "pad every training batch to --max-length tokens (the model runs at that sequence length)");
  add_text_task_options(app, data_options, deterministic, workers);
  app.add_option("--threads", threads, "threads for the math (0: all cores)");
  output.add_to(app);
  amp_option.add_to(app);
  onnx_option.add_to(app);
  onnx_option.add_export_from(app);
  add_accum_steps_option(app, accum_steps);
  keep_best.add_to(app);
  profile.add_to(app);
  cuda_graph.add_to(app);
  app.add_flag("--smoke-test", smoke_test, "a few quick epochs on 512 texts; exit 1 unless the loss falls");
  CLI11_PARSE(app, argc, argv);
  if (smoke_test) {
    data_options.train_limit = 512;
    p.epochs = 4;
  }

  try {
    if (threads > 0) set_num_threads(threads);
    use_deterministic_algorithms(deterministic);
    manual_seed(data_options.seed);
    const Device device(device_name);
    cuda_graph.check(device, accum_steps, /*distributed=*/false);
    // A saved model's words are its vocabulary's, beside the file (text_task.h).
    if (!onnx_option.from.empty()) data_options.vocab_path = existing_vocab_beside(onnx_option.from);
    TextTask task = load_text_task(data_options);
    auto train_loader = text_loader(task.train, p.batch_size, true, data_options.seed, workers, device.is_cuda(), {0, 1},
                                    pad_to_max_length ? data_options.max_length : 0);
    if (pad_to_max_length) std::printf("training batches padded to %zu tokens\n", data_options.max_length);
    auto test_loader = text_loader(task.test, 256, false, 0, workers, device.is_cuda());

    auto model = make_model(int64_t(task.vocab.size()), int64_t(task.labels.size()));
    model->to(device);
    if (onnx_option.export_saved(model, int64_t(task.vocab.size()), device)) return 0;  // no training
    std::printf("%s\n", model->str().c_str());
    optim::AdamW optimizer(model->parameters(), optim::AdamOptions(p.lr).capturable(cuda_graph.capturable(device)));
    amp::GradScaler scaler({.enabled = amp_option.needs_scaler()});

    train::MetricsLog log(output.dir, p.name);
    output.attach(log);
    train::RunSummary summary;
    Evaluation test{};
    const train::GradientAccumulation accumulation(accum_steps, train_loader.size());
    train::EarlyStopping stopper = keep_best.stopper();
    // Each step read once an epoch (read_each_step off): a GPU step never waits for the host.
    TrainingLoop loop({.optimizer = optimizer, .scaler = scaler, .parameters = model->parameters(),
                       .max_norm = p.clip_norm, .amp = amp_option, .device = device, .cuda_graph = cuda_graph,
                       .accumulation = accumulation, .read_each_step = false},
                      [&](const std::vector<Tensor>& in, bool) -> std::vector<Tensor> {  // tokens, lengths, labels
                        return {nn::functional::cross_entropy(model->forward(in[0], in[1]), in[2])};
                      });
    std::unique_ptr<profiler::Profile> prof = profile.start();
    size_t train_peak = 0;  // over the training steps only: evaluation's batches are larger
    for (int epoch = 0; epoch < p.epochs && !stopper.should_stop(); ++epoch) {
      reset_peak(device);
      summary.start_epoch();
      loop.start_epoch(epoch, p.epochs);
      size_t tokens = 0;
      for (data::TextBatch& cpu_batch : train_loader) {
        data::TextBatch batch = cpu_batch.to(device, /*non_blocking=*/true);  // pinned on a GPU run
        // A graph's inputs all live on the GPU; eagerly the model takes the lengths on the CPU.
        const Tensor lengths = cuda_graph.on ? batch.lengths.to(device, /*non_blocking=*/true) : batch.lengths;
        loop.step({batch.tokens, lengths, batch.labels}, static_cast<double>(batch.labels.size(0)));
        tokens += static_cast<size_t>(batch.lengths.sum().item<int64_t>());  // lengths stay on the CPU
        profile_step(prof);
      }
      const double train_loss = loop.finish_epoch().mean(0);  // waits for the epoch's last step
      train_peak = std::max(train_peak, peak_tensor_bytes(device));
      summary.end_epoch(tokens);
      test = evaluate(test_loader, *model, device);
      log.log_epoch(epoch + 1, {{"train_loss", train_loss}, {"test_loss", test.loss}, {"test_acc", test.accuracy}});
      std::printf("epoch %d: train loss %.4f | held-out loss %.4f acc %.4f | %.2f s\n", epoch + 1, train_loss,
                  test.loss, test.accuracy, summary.epoch_seconds().back());
      if (stopper.step(keep_best.monitored(test)) && !keep_best.path.empty())
        keep_best.save({model.get(), &optimizer, nullptr, 0, epoch + 1}, task.vocab);
      report_early_stop(keep_best, stopper);
    }
    test = reload_best(keep_best, stopper, test_loader, *model, device, test);

    train::write_training_curves(output.dir + "/" + p.name, log);
    summary.set("test_accuracy", test.accuracy);
    summary.set("weights_crc32c", weights_crc32c(*model));
    summary.record_device_peak(device);
    std::printf("%s", summary.format("tokens").c_str());
    std::printf("peak tensor memory in training: %zu bytes (%s)\n", train_peak, device.str().c_str());
    print_weights_crc32c(*model);
    std::printf("held-out accuracy: %.4f (%zu texts)\n", test.accuracy, task.test->size());
    onnx_option.export_model<2>(model, example_texts(int64_t(task.vocab.size()), device), {"tokens", "lengths"});
    if (smoke_test && !loss_fell(log)) return 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "%s: %s\n", p.name.c_str(), e.what());
    return 2;
  }
  return 0;
}

}  // namespace examples
