// Loom's flagship example: a sentiment classifier, Embedding -> LSTM -> Linear, trained on
// real movie-review sentences (examples/data/movie_snippets.tsv, see its README) and
// evaluated on a held-out fifth of them. The loop is the one a PyTorch user writes:
// DataLoader, model(x), cross_entropy, backward, clip, step, scheduler, checkpoint.
//
//   ./build/cpu/examples/text_classification                       # defaults: a few minutes
//   ./build/cpu/examples/text_classification --epochs 6 --checkpoint run.safetensors --stop-after 3
//   ./build/cpu/examples/text_classification --resume run.safetensors --epochs 6
//   (--stop-after N ends a run early, as if interrupted; resuming then continues exactly
//   where an uninterrupted run would be: same batches, same dropout masks, same numbers)
//   ./build/cpu/examples/text_classification --checkpoint run.safetensors --resume auto
//   (SIGTERM or SIGUSR1 ends the step, writes the checkpoint mid-epoch and exits 143; run
//   again with --resume auto to go on from it: examples/resume_option.h)
//   ./build/cpu/examples/text_classification --data path/to/aclImdb  # or any label<TAB>text file
//   ./build/cpu/examples/text_classification --keep-best best.safetensors --patience 3
//   (keeps the checkpoint of the best held-out epoch, stops after 3 epochs without a better
//   one, and reports the best model's accuracy at the end)
//   ./build/cpu/examples/text_classification --export-from best.safetensors --export-onnx model.onnx
//   (a saved checkpoint's model as ONNX, without training: docs/onnx.md)
//   ./build/cpu/examples/text_classification --accum-steps 4 --batch-size 8  # steps of 32 texts
//   ./build/cpu/examples/text_classification --amp bf16   # mixed precision (fp16 on CUDA)
//   ./build/cpu/examples/text_classification --checkpoint-every 16  # LSTM activations recomputed
//   (in backward, 16 time steps at a time: less memory for long texts, the same numbers)
//   ./build/cpu/examples/text_classification --profile runs/profile  # trace, timeline and table of 5 steps
//   ./build/cuda/examples/text_classification --device cuda --cuda-graph  # each step one CUDA graph
//   build/cpu/loomrun --nproc-per-node 2 build/cpu/examples/text_classification --distributed
//   (data-parallel: each rank trains on its half of every epoch, gradients averaged by
//   DistributedDataParallel; rank 0 prints, writes the metrics and the checkpoints)
//
// Writes metrics (CSV + JSONL), loss/accuracy curves (SVG) and a summary (printed, and as
// text_classification_summary.json) under --out, and
// with --tensorboard DIR the same metrics as TensorBoard event files (tensorboard --logdir DIR).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>

#include "amp_option.h"
#include "onnx_option.h"
#include "bundled_data.h"
#include "cuda_graph_option.h"
#include "distributed_option.h"
#include "keep_best.h"
#include "loom.h"
#include "text_classification_model.h"
#include "profile_option.h"
#include "resume_option.h"
#include "run_options.h"
#include "text_task.h"
#include "training_loop.h"

using namespace loom;

int main(int argc, char** argv) {
  CLI::App app{"Train an LSTM sentiment classifier on labelled text"};
  examples::TextTaskOptions data_options;
  data_options.path = examples::bundled_data("movie_snippets.tsv");
  data_options.min_freq = 1;
  std::string device_name = "cpu", checkpoint;
  examples::MetricsOutput output{"runs/text_classification"};
  examples::ResumeOption resume_option;
  examples::KeepBestOptions keep_best;
  examples::AmpOption amp_option;
  examples::OnnxOption onnx_option;
  examples::DistributedOption distributed;
  examples::ProfileOption profile;
  examples::CudaGraphOption cuda_graph;
  int epochs = 5, threads = 0, stop_after = 0;
  size_t batch_size = 32, workers = 2, embed_dim = 100, hidden = 128, accum_steps = 1;
  int64_t checkpoint_every = 0;
  double lr = 3e-3, dropout = 0.3;
  bool smoke_test = false;
  bool deterministic = false;
  app.add_option("--data", data_options.path, "label<TAB>text file (.tsv), CSV file, or aclImdb directory");
  examples::add_training_options(app, device_name, epochs, batch_size, lr);
  app.add_option("--embed-dim", embed_dim);
  app.add_option("--hidden", hidden);
  app.add_option("--max-length", data_options.max_length, "tokens kept per text");
  app.add_option("--min-freq", data_options.min_freq, "rarer words become <unk>");
  examples::add_text_task_options(app, data_options, deterministic, workers);
  app.add_option("--threads", threads, "threads for the math (0: all cores)");
  app.add_option("--checkpoint", checkpoint, "save a training checkpoint here after every epoch");
  resume_option.add_to(app);
  app.add_option("--stop-after", stop_after, "stop after this many epochs of this run, as if interrupted");
  output.add_to(app);
  examples::add_accum_steps_option(app, accum_steps);
  app.add_option("--checkpoint-every", checkpoint_every,
                 "recompute the LSTM's activations in backward in chunks of K time steps: less memory, "
                 "more compute, the same results (0: off; nn::RNNOptions::checkpoint_every)")
      ->check(CLI::NonNegativeNumber);
  keep_best.add_to(app);
  amp_option.add_to(app);
  onnx_option.add_to(app);
  onnx_option.add_export_from(app);
  distributed.add_to(app);
  profile.add_to(app);
  cuda_graph.add_to(app);
  app.add_flag("--smoke-test", smoke_test, "a few quick epochs on 512 texts; exit 1 unless the loss falls");
  CLI11_PARSE(app, argc, argv);
  if (smoke_test) {
    data_options.train_limit = 512;
    epochs = 4;
  }
  try {
    // A saved model's words are its vocabulary's, beside the file (examples/text_task.h).
    if (!onnx_option.from.empty()) data_options.vocab_path = examples::existing_vocab_beside(onnx_option.from);
    if (threads > 0) set_num_threads(threads);
    use_deterministic_algorithms(deterministic);
    manual_seed(data_options.seed);
    Device device(device_name);
    distributed.init(device);
    cuda_graph.check(device, accum_steps, distributed.enabled);
    if (distributed.rank() > 0) output.dir += "/rank" + std::to_string(distributed.rank());
    const std::string resume = resume_option.path(checkpoint);  // --resume auto: --checkpoint's, if there
    if (!resume.empty()) data_options.vocab_path = examples::existing_vocab_beside(resume);
    examples::TextTask task = examples::load_text_task(data_options);
    auto train_loader = examples::text_loader(task.train, batch_size, true, data_options.seed, workers, device.is_cuda(),
                                              distributed.shard());
    auto test_loader = examples::text_loader(task.test, 256, false, 0, workers, device.is_cuda());

    auto model = std::make_shared<examples::SentimentLSTM>(task.vocab.size(), embed_dim, hidden, task.labels.size(), dropout,
                                                              checkpoint_every);
    model->to(device);
    if (onnx_option.export_saved(model, int64_t(task.vocab.size()), device)) return 0;  // no training
    // Wrapped after a resume would also do: the wrapper copies rank 0's weights to all.
    std::optional<nn::parallel::DistributedDataParallel<std::shared_ptr<examples::SentimentLSTM>>> ddp;
    optim::Adam optimizer(model->parameters(), optim::AdamOptions(lr).capturable(cuda_graph.capturable(device)));
    optim::CosineAnnealingLR scheduler(optimizer, epochs);
    amp::GradScaler scaler({.enabled = amp_option.needs_scaler()});
    train::EarlyStopping stopper = keep_best.stopper();
    optim::StateDict stopper_state;  // the stopper's state in the training checkpoint
    const auto training_checkpoint = [&](int64_t step, int64_t epoch) {
      stopper_state = stopper.state_dict();
      return optim::Checkpoint{model.get(), &optimizer, &scheduler, step, epoch, &scaler, &stopper_state,
                               [&](const optim::StateDict& s) {  // a mid-epoch position, and the stopper's
                                 optim::StateDict rest = s;
                                 examples::take_position(rest, train_loader.size(), 2, resume);
                                 if (!rest.empty()) stopper.check_state_dict(rest);
                               }};
    };

    int64_t start_epoch = 0, step = 0;
    std::optional<examples::EpochPosition> position;  // where a stopped epoch resumes
    if (!resume.empty()) {
      optim::TrainingState state = optim::load_checkpoint(resume, training_checkpoint(0, 0));
      position = examples::take_position(stopper_state, train_loader.size(), 2, resume);  // loss, acc
      if (!stopper_state.empty()) stopper.load_state_dict(stopper_state);
      start_epoch = state.epoch;
      step = state.step;
      std::printf("resumed from %s at epoch %lld, step %lld", resume.c_str(), static_cast<long long>(start_epoch),
                  static_cast<long long>(step));
      if (position) std::printf(", batch %zu of %zu", position->batches, train_loader.size());
      std::printf("\n");
      // The saved totals are every rank's together: rank 0 goes on from them, the others from 0.
      if (position && !distributed.is_main()) {
        position->totals.sums.assign(position->totals.sums.size(), 0.0);
        position->totals.seen = 0;
      }
    }
    train_loader.set_epoch(start_epoch);  // the shuffle order of the epoch we resume at
    if (position) train_loader.set_start_batch(position->batches, position->loader_seed);  // and the batches it had not seen
    if (distributed.enabled) ddp.emplace(model);

    train::MetricsLog log(output.dir, "text_classification");
    output.attach(log);
    train::RunSummary summary;
    examples::Evaluation test{};
    const train::GradientAccumulation accumulation(accum_steps, train_loader.size());
    const int64_t end_epoch = stop_after > 0 ? std::min<int64_t>(epochs, start_epoch + stop_after) : epochs;
    // One step: forward and loss (and the batch's correct predictions), eagerly or as one CUDA
    // graph with --cuda-graph (examples/training_loop.h).
    // SIGTERM or SIGUSR1: the step ends, a checkpoint is written and the run exits 143.
    train::PreemptionGuard preemption;
    examples::TrainingLoop loop(
        {.optimizer = optimizer, .scaler = scaler, .parameters = model->parameters(), .max_norm = 1.0,
         .amp = amp_option, .device = device, .cuda_graph = cuda_graph, .accumulation = accumulation, .log = &log,
         .stat_names = {"loss", "acc"}, .item_name = "tokens", .preemption = &preemption,
         .any_rank = distributed.any_rank()},
        [&](const std::vector<Tensor>& in, bool ends_step) -> std::vector<Tensor> {  // tokens, lengths, labels
          // Only a step's last micro-batch all-reduces: the others accumulate locally.
          std::optional<nn::parallel::DataParallelBase::NoSync> local;
          if (ddp && !ends_step) local.emplace(ddp->no_sync());
          const Tensor logits = ddp ? (*ddp)(in[0], in[1]) : model->forward(in[0], in[1]);
          return {nn::functional::cross_entropy(logits, in[2]), logits.argmax(1).eq(in[2]).sum()};
        });
    loop.set_steps(step);
    std::unique_ptr<profiler::Profile> prof = profile.start();
    for (int64_t epoch = start_epoch; epoch < end_epoch && !stopper.should_stop(); ++epoch) {
      summary.start_epoch();
      loop.start_epoch(epoch, epochs);
      if (position && epoch == start_epoch) loop.resume_epoch(*position);
      size_t tokens = 0;
      for (data::TextBatch& cpu_batch : train_loader) {
        data::TextBatch batch = cpu_batch.to(device, /*non_blocking=*/true);  // pinned on a GPU run
        const size_t batch_tokens = static_cast<size_t>(batch.lengths.sum().item<int64_t>());  // on the CPU
        tokens += batch_tokens;
        // A graph's inputs all live on the GPU; eagerly the LSTM takes the lengths on the CPU.
        const Tensor lengths = cuda_graph.on ? batch.lengths.to(device, /*non_blocking=*/true) : batch.lengths;
        loop.step({batch.tokens, lengths, batch.labels}, static_cast<double>(batch.labels.size(0)), batch_tokens);
        examples::profile_step(prof);
        if (loop.stop_requested()) break;
      }
      if (loop.stop_requested()) {  // every rank, after the same step
        const std::string path = examples::preemption_checkpoint(checkpoint, output.dir + "/preempted.safetensors");
        return examples::save_stopped(loop, distributed, preemption, path, [&](const examples::EpochPosition& at) {
          task.vocab.save(examples::vocab_beside(path));  // first: a checkpoint on disk means both are there
          const optim::Checkpoint c = training_checkpoint(loop.steps(), epoch);  // the stopper's state into extra
          examples::put_position(stopper_state, {at.batches, at.totals, train_loader.base_seed()});  // the epoch's position
          optim::save_checkpoint(path, c);
        });
      }
      const examples::EpochTotals epoch_totals = loop.finish_epoch();
      step = loop.steps();
      scheduler.step();
      std::vector<double> totals = {epoch_totals.sums[0], epoch_totals.sums[1], epoch_totals.seen};
      distributed.sum(totals);  // over every rank's share
      const double loss_sum = totals[0], correct = totals[1], seen = totals[2];
      summary.end_epoch(tokens);

      test = examples::evaluate(test_loader, *model, device);
      log.log_epoch(epoch + 1, {{"train_loss", loss_sum / seen}, {"train_acc", correct / seen},
                                {"test_loss", test.loss}, {"test_acc", test.accuracy}});
      std::printf("epoch %lld: train loss %.4f acc %.4f | held-out loss %.4f acc %.4f\n",
                  static_cast<long long>(epoch + 1), loss_sum / seen, correct / seen, test.loss,
                  test.accuracy);
      // Every rank evaluates the same weights on the whole held-out set: the same decisions.
      const bool best = stopper.step(keep_best.monitored(test));
      if (best && !keep_best.path.empty() && distributed.is_main())
        keep_best.save(training_checkpoint(step, epoch + 1), task.vocab);
      if (!checkpoint.empty() && distributed.is_main()) {
        task.vocab.save(examples::vocab_beside(checkpoint));  // first: a checkpoint on disk means both are there
        optim::save_checkpoint(checkpoint, training_checkpoint(step, epoch + 1));
      }
      distributed.barrier();  // the files are written before any rank reads them
      examples::report_early_stop(keep_best, stopper);
    }

    if (start_epoch >= end_epoch) test = examples::evaluate(test_loader, *model, device);
    test = examples::reload_best(keep_best, stopper, test_loader, *model, device, test);
    for (const std::string& file : train::write_training_curves(output.dir + "/text_classification", log))
      std::printf("wrote %s\n", file.c_str());
    summary.set("test_accuracy", test.accuracy);
    summary.set("weights_crc32c", examples::weights_crc32c(*model));  // equal on every rank
    summary.record_device_peak(device);
    std::printf("%s", summary.format("tokens").c_str());
    examples::print_weights_crc32c(*model);
    std::ofstream(output.dir + "/text_classification_summary.json") << summary.to_json() << "\n";
    std::printf("held-out accuracy: %.4f (%zu texts)\n", test.accuracy, task.test->size());
    if (distributed.is_main())
      onnx_option.export_model<2>(model, examples::example_texts(int64_t(task.vocab.size()), device), {"tokens", "lengths"});
    if (smoke_test && !examples::loss_fell(log)) return 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "text_classification: %s\n", e.what());
    return 2;
  }
  return 0;
}
