// The training loop the examples share: each micro-batch's step (zero_grad at the first
// micro-batch of an optimizer step, forward and loss under --amp, the scaled backward, and at
// its last one clipping and the scaler's step), run eagerly or, with --cuda-graph, replayed as
// one CUDA graph (train::GraphedStep runs the same step function both ways), with each
// optimizer step's loss logged and the epoch's statistics added up. An example gives only
// what makes it that example: its inputs and its forward and loss.
//
//   examples::TrainingLoop loop({.optimizer = opt, .scaler = scaler, .parameters = model->parameters(),
//                                .max_norm = 1.0, .amp = amp_option, .device = device,
//                                .cuda_graph = cuda_graph, .accumulation = accumulation, .log = &log},
//                               [&](const std::vector<Tensor>& in, bool ends_step) -> std::vector<Tensor> {
//                                 return {nn::functional::mse_loss(model->forward(in[0]), in[1])};
//                               });
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     loop.start_epoch(epoch, epochs);
//     for (auto& batch : loader) loop.step({batch.input.to(device), batch.target.to(device)}, batch_size);
//     examples::EpochTotals t = loop.finish_epoch();   // t.mean(0): the epoch's training loss
//   }
//
// Eager steps are read as they go (the progress bar shows the running means); graphed steps
// read nothing until finish_epoch, which waits for the GPU once. With read_each_step off,
// eager steps are not read either: their statistics stay on the device until finish_epoch,
// so a GPU step never waits for the host (docs/cuda.md, "A step without host syncs").
//
// Given a train::PreemptionGuard, the loop asks after each optimizer step whether SIGTERM or
// SIGUSR1 came (on every rank at once with `any_rank`, so that all stop after the same step;
// a GPU loop that reads nothing back per step asks every 64 steps, to stay free of syncs);
// stop_requested() then tells the example to save position() in a checkpoint and exit
// (examples/resume_option.h). resume_epoch() continues such an epoch where it stopped.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp_option.h"
#include "cuda_graph_option.h"
#include "loom.h"

namespace examples {

// What an epoch's micro-batches add up to: Σ loss · weight first, then Σ of each further
// statistic the forward returned (correct predictions, say), and Σ weight.
struct EpochTotals {
  std::vector<double> sums;
  double seen = 0;
  double mean(size_t k) const { return sums[k] / seen; }
};

// Where an epoch stopped: the micro-batches it had consumed and what they added up to.
struct EpochPosition {
  size_t batches = 0;
  EpochTotals totals;
  uint64_t loader_seed = 0;  // the DataLoader pass's base seed, which the resumed pass takes again
};

struct TrainingParts {
  loom::optim::Optimizer& optimizer;
  loom::amp::GradScaler& scaler;
  std::vector<loom::Tensor> parameters;  // clipped to max_norm before each step when it is > 0
  double max_norm = 0;
  const AmpOption& amp;
  loom::Device device;
  const CudaGraphOption& cuda_graph;
  const loom::train::GradientAccumulation& accumulation;
  loom::train::MetricsLog* log = nullptr;  // each optimizer step's loss, when given
  std::vector<std::string> stat_names = {"loss"};  // the progress bar's columns, for the first statistics
  std::string item_name;                           // what the bar counts; empty: no bar
  bool read_each_step = true;                      // eager steps read at once (else at the epoch's end)
  loom::train::PreemptionGuard* preemption = nullptr;  // asked after each optimizer step, when given
  // A flag or'ed over the ranks (a collective every rank calls); empty: one process.
  std::function<bool(bool)> any_rank;
};

class TrainingLoop {
 public:
  // One micro-batch's forward and loss, run under --amp: returns the loss first, then any
  // further statistics to add up, each a scalar tensor. ends_step: its optimizer step ends
  // with it (the others may skip DistributedDataParallel's all-reduce with no_sync()).
  using ForwardLoss = std::function<std::vector<loom::Tensor>(const std::vector<loom::Tensor>& inputs, bool ends_step)>;

  TrainingLoop(TrainingParts parts, ForwardLoss forward_loss)
      : parts_(std::move(parts)),
        forward_loss_(std::move(forward_loss)),
        graphed_([this](const std::vector<loom::Tensor>& in) { return statistics(run_step(in, true, true, 1.0)); },
                 parts_.cuda_graph.options()) {}

  int64_t steps() const { return steps_; }
  int64_t epoch() const { return epoch_; }  // the epoch started last (0-based)
  void set_steps(int64_t steps) { steps_ = steps; }  // a resumed run's count
  // A stop was asked for (on any rank) and the optimizer step in flight has ended.
  bool stop_requested() const { return stop_; }

  void start_epoch(int64_t epoch, int64_t epochs) {
    epoch_ = epoch;
    micro_batch_ = batches_ = 0;
    totals_ = {std::vector<double>(parts_.stat_names.size(), 0.0), 0};  // grows to what the forward returns
    step_losses_ = {};
    if (!parts_.item_name.empty())
      bar_.emplace("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs),
                   parts_.accumulation.batches_per_epoch(),
                   loom::train::ProgressOptions{.item_name = parts_.item_name});
  }

  // One micro-batch of `weight` examples (what its loss is a mean over) and `items` items
  // for the bar (tokens, characters...; 0: weight).
  void step(const std::vector<loom::Tensor>& inputs, double weight, size_t items = 0) {
    const size_t counted = items > 0 ? items : static_cast<size_t>(weight);
    ++batches_;
    if (parts_.cuda_graph.on || !parts_.read_each_step) {
      const loom::Tensor stats = parts_.cuda_graph.on ? graphed_(inputs) : statistics(eager_step(inputs));
      deferred_.add(stats, weight);
      if (bar_) bar_->update(1, {}, counted);
      check_stop(parts_.cuda_graph.on || parts_.accumulation.ends_step(micro_batch_ - 1));
      return;
    }
    const std::vector<loom::Tensor> out = eager_step(inputs);
    std::vector<double> values;
    for (const loom::Tensor& t : out) values.push_back(t.item<double>());
    add(values, weight);
    const double loss = values[0];
    if (std::optional<double> step_loss = step_losses_.add(parts_.accumulation, micro_batch_ - 1, loss))
      log_step(*step_loss);
    if (bar_) bar_->update(1, running_means(), counted);
    check_stop(parts_.accumulation.ends_step(micro_batch_ - 1));
  }

  // The epoch so far, for a checkpoint written mid-epoch (reads what the device holds).
  EpochPosition position() {
    read_deferred();
    return {batches_, totals_};
  }
  // Continues an epoch a checkpoint stopped (after start_epoch): the loader starts at
  // position.batches (DataLoader::set_start_batch), the totals go on from the saved ones.
  void resume_epoch(const EpochPosition& position) {
    micro_batch_ = batches_ = position.batches;
    totals_ = position.totals;
    if (bar_) bar_->update(position.batches, {}, 0);
  }

  // Ends the epoch: reads what the device holds (one wait), logs those steps, closes the bar.
  EpochTotals finish_epoch() {
    if (bar_) bar_->close();
    bar_.reset();
    read_deferred();
    return totals_;
  }

 private:
  void read_deferred() {
    for (const DeviceStepStats::Step& s : deferred_.read()) {
      add(s.values, s.weight);
      if (parts_.cuda_graph.on) log_step(s.values[0]);  // a graphed step is a whole optimizer step
    }
  }

  // After each micro-batch: at an optimizer step's end, whether any rank was asked to stop.
  // Asking the other ranks is a collective the host waits for: a loop whose GPU steps read
  // nothing back (graphed, or read_each_step off) asks every kDeferredStopEvery optimizer
  // steps only, on every rank at the same steps, so the step stays free of host syncs (a
  // preemption's warning is minutes; those steps take milliseconds).
  static constexpr int64_t kDeferredStopEvery = 64;
  void check_stop(bool ends_step) {
    if (!parts_.preemption || !ends_step || stop_) return;
    bool stop = parts_.preemption->requested();
    if (parts_.any_rank) {
      const bool deferred = (parts_.cuda_graph.on || !parts_.read_each_step) && !parts_.device.is_cpu();
      if (deferred && ++steps_since_stop_check_ < kDeferredStopEvery) return;
      steps_since_stop_check_ = 0;
      stop = parts_.any_rank(stop);
    }
    if (stop) parts_.preemption->request();  // another rank's signal stops this one too
    stop_ = stop;
  }

  // The micro-batch's step: the same function eagerly and under capture.
  std::vector<loom::Tensor> run_step(const std::vector<loom::Tensor>& inputs, bool starts, bool ends, double factor) {
    if (starts) parts_.optimizer.zero_grad();
    std::vector<loom::Tensor> out;
    {
      auto autocast = parts_.amp.guard(parts_.device);
      out = forward_loss_(inputs, ends);
    }
    parts_.scaler.scale(out[0] * factor).backward();
    if (ends) scaled_step(parts_.scaler, parts_.optimizer, parts_.parameters, parts_.max_norm);
    return out;
  }

  std::vector<loom::Tensor> eager_step(const std::vector<loom::Tensor>& inputs) {
    const loom::train::GradientAccumulation& a = parts_.accumulation;
    const size_t i = micro_batch_++;
    return run_step(inputs, a.starts_step(i), a.ends_step(i), a.loss_factor(i));
  }

  // A micro-batch's statistics into the epoch's totals: the loss weighted, the rest summed.
  void add(const std::vector<double>& values, double weight) {
    if (totals_.sums.size() < values.size()) totals_.sums.resize(values.size(), 0.0);
    totals_.sums[0] += values[0] * weight;
    for (size_t k = 1; k < values.size(); ++k) totals_.sums[k] += values[k];
    totals_.seen += weight;
  }

  // The statistics as one float32 tensor (k) on the device, for reading later.
  static loom::Tensor statistics(const std::vector<loom::Tensor>& out) {
    std::vector<loom::Tensor> flat;
    for (const loom::Tensor& t : out) flat.push_back(t.detach().to(loom::kFloat32).reshape({}));
    return loom::stack(flat);
  }

  loom::train::Postfix running_means() const {
    loom::train::Postfix means;
    for (size_t k = 0; k < parts_.stat_names.size() && k < totals_.sums.size(); ++k)
      means.emplace_back(parts_.stat_names[k], totals_.sums[k] / totals_.seen);
    return means;
  }

  void log_step(double loss) {
    ++steps_;
    if (parts_.log) parts_.log->log_step(epoch_ + 1, steps_, {{"loss", loss}});
  }

  TrainingParts parts_;
  ForwardLoss forward_loss_;
  loom::train::GraphedStep graphed_;
  int64_t steps_ = 0, epoch_ = 0;
  size_t micro_batch_ = 0, batches_ = 0;  // this epoch's micro-batches: for accumulation, and all
  bool stop_ = false;
  int64_t steps_since_stop_check_ = 0;  // optimizer steps since the ranks were last asked (deferred GPU steps)
  EpochTotals totals_;
  loom::train::AccumulatedLoss step_losses_;
  DeviceStepStats deferred_;  // graphed (or unread eager) steps' statistics, read at the epoch's end
  std::optional<loom::train::ProgressBar> bar_;
};

}  // namespace examples
