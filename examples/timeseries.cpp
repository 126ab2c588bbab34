// Forecasting a real series: the weekly CO2 concentration at Mauna Loa, 1958-2001
// (examples/data/co2_weekly.csv, see its README). From the last 52 weeks an LSTM (or a
// plain RNN, --cell rnn) predicts the next 8 weeks; it is judged on the most recent 15% of
// the series against the naive forecast "every coming week equals the last one seen",
// which misses the seasonal cycle.
//
//   ./build/cpu/examples/timeseries                      # defaults: under a minute
//   ./build/cpu/examples/timeseries --cell rnn --horizon 4
//   ./build/cuda/examples/timeseries --device cuda --cuda-graph  # each training step one CUDA graph
//
// Writes metrics (CSV + JSONL), the loss curves and test predictions vs truth (SVG) and a
// summary under --out.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "amp_option.h"
#include "onnx_option.h"
#include "cuda_graph_option.h"
#include "bundled_data.h"
#include "profile_option.h"
#include "run_options.h"
#include "loom.h"
#include "smoke_test.h"
#include "training_loop.h"
#include "timeseries_model.h"

using namespace loom;
using examples::Forecaster;

// The model's forecasts for every window of a loader, and the true values, in ppm.
struct Forecasts {
  std::vector<double> predicted, actual;  // window-major: window w, step h at w * H + h
  double rmse() const {
    double squares = 0;
    for (size_t i = 0; i < actual.size(); ++i) squares += std::pow(predicted[i] - actual[i], 2);
    return std::sqrt(squares / double(actual.size()));
  }
};

template <typename Loader>
Forecasts forecast(Loader& loader, Forecaster& model, const data::Normalizer& normalizer,
                   Device device) {
  NoGradGuard no_grad;
  model.eval();
  Forecasts f;
  for (data::WindowBatch& batch : loader) {
    Tensor predicted = model.forward(batch.input.to(device)).unsqueeze(-1);  // (B, H, 1)
    for (double v : normalizer.inverse(predicted.cpu()).to_vector<double>()) f.predicted.push_back(v);
    for (double v : normalizer.inverse(batch.target).to_vector<double>()) f.actual.push_back(v);
  }
  model.train();
  return f;
}

// YYYYMMDD as a fractional year, for the plot's x axis.
double decimal_year(double yyyymmdd) {
  const int date = static_cast<int>(yyyymmdd);
  return date / 10000 + ((date / 100 % 100) - 1) / 12.0 + (date % 100 - 1) / 365.25;
}

int main(int argc, char** argv) {
  CLI::App app{"Forecast weekly CO2 at Mauna Loa with an LSTM or RNN"};
  std::string data_path = examples::bundled_data("co2_weekly.csv");
  std::string device_name = "cpu", cell = "lstm";
  examples::MetricsOutput output{"runs/timeseries"};
  examples::AmpOption amp_option;
  examples::OnnxOption onnx_option;
  examples::ProfileOption profile;
  examples::CudaGraphOption cuda_graph;
  int epochs = 30, threads = 0;
  size_t batch_size = 32, input_length = 52, horizon = 8, accum_steps = 1;
  int64_t hidden = 64, layers = 1;
  double lr = 3e-3;
  uint64_t seed = 0;
  bool smoke_test = false;
  app.add_option("--data", data_path, "CSV file with date and co2 columns");
  app.add_option("--cell", cell, "rnn or lstm");
  examples::add_training_options(app, device_name, epochs, batch_size, lr);
  app.add_option("--hidden", hidden);
  app.add_option("--layers", layers);
  app.add_option("--input-length", input_length, "weeks the model sees");
  app.add_option("--horizon", horizon, "weeks it predicts");
  app.add_option("--seed", seed);
  app.add_option("--threads", threads, "threads for the math (0: all cores)");
  output.add_to(app, "folder for metrics, plots and the summary");
  amp_option.add_to(app);
  onnx_option.add_to(app);
  profile.add_to(app);
  cuda_graph.add_to(app);
  examples::add_accum_steps_option(app, accum_steps);
  app.add_flag("--smoke-test", smoke_test, "a few quick epochs on 400 weeks; exit 1 unless the loss falls");
  CLI11_PARSE(app, argc, argv);
  if (smoke_test) epochs = 8;

  try {
    LOOM_CHECK(epochs > 0, ValueError, "--epochs must be positive, got ", epochs);
    if (threads > 0) set_num_threads(threads);
    manual_seed(seed);
    const Device device(device_name);
    cuda_graph.check(device, accum_steps, /*distributed=*/false);

    // Read, split chronologically 70/15/15 and normalize with the training part's statistics.
    const data::CsvColumnsOptions columns{.columns = {"date", "co2"},
                                          .missing = data::CsvColumnsOptions::Missing::Interpolate};
    data::NumericTable table = data::read_csv_columns(data_path, columns);
    const auto rows = static_cast<int64_t>(table.rows());
    Tensor co2 = from_vector(table.columns[1], {rows, 1}).to(kFloat32);  // (N, 1) ppm
    data::SeriesSplit split = data::split_series(co2, 0.7, 0.15);
    const double ppm_per_unit = split.normalizer.std().item<double>();
    const data::WindowOptions windows{.input_length = input_length, .horizon = horizon};
    Tensor train_part = smoke_test ? split.train.narrow(0, 0, std::min<int64_t>(400, split.train.size(0)))
                                   : split.train;
    auto train_set = std::make_shared<data::WindowDataset>(train_part, windows);
    auto valid_set = std::make_shared<data::WindowDataset>(split.valid, windows);
    auto test_set = std::make_shared<data::WindowDataset>(split.test, windows);
    std::printf("data: %s: %lld weeks (%zu gaps interpolated): %zu train / %zu valid / %zu test "
                "windows of %zu -> %zu weeks\n", data_path.c_str(), static_cast<long long>(rows),
                table.interpolated, train_set->size(), valid_set->size(), test_set->size(), input_length,
                horizon);

    auto train_loader = data::make_data_loader(train_set, data::collate_windows,
                                               data::DataLoaderOptions(batch_size).shuffle(true).seed(seed));
    auto valid_loader = data::make_data_loader(valid_set, data::collate_windows, data::DataLoaderOptions(256));
    auto test_loader = data::make_data_loader(test_set, data::collate_windows, data::DataLoaderOptions(256));

    auto model = std::make_shared<Forecaster>(cell, hidden, layers, static_cast<int64_t>(horizon));
    model->to(device);
    optim::Adam optimizer(model->parameters(), optim::AdamOptions(lr).capturable(cuda_graph.capturable(device)));
    amp::GradScaler scaler({.enabled = amp_option.needs_scaler()});
    optim::CosineAnnealingLR scheduler(optimizer, epochs);

    train::MetricsLog log(output.dir, "timeseries");
    output.attach(log);
    train::RunSummary summary;
    const train::GradientAccumulation accumulation(accum_steps, train_loader.size());
    examples::TrainingLoop loop({.optimizer = optimizer, .scaler = scaler, .parameters = model->parameters(),
                                 .max_norm = 1.0, .amp = amp_option, .device = device, .cuda_graph = cuda_graph,
                                 .accumulation = accumulation, .log = &log, .item_name = "windows"},
                                [&](const std::vector<Tensor>& in, bool) -> std::vector<Tensor> {
                                  return {nn::functional::mse_loss(model->forward(in[0]), in[1])};
                                });
    std::unique_ptr<profiler::Profile> prof = profile.start();
    for (int epoch = 0; epoch < epochs; ++epoch) {
      summary.start_epoch();
      loop.start_epoch(epoch, epochs);
      for (data::WindowBatch& batch : train_loader) {
        Tensor input = batch.input.to(device);                // (B, L, 1)
        Tensor target = batch.target.to(device).squeeze(-1);  // (B, H)
        loop.step({input, target}, double(input.size(0)));
        examples::profile_step(prof);
      }
      const examples::EpochTotals totals = loop.finish_epoch();
      scheduler.step();
      summary.end_epoch(static_cast<size_t>(totals.seen));

      const double valid_rmse = forecast(valid_loader, *model, split.normalizer, device).rmse();
      const double valid_loss = std::pow(valid_rmse / ppm_per_unit, 2);  // MSE in normalized units
      log.log_epoch(epoch + 1, {{"train_loss", totals.mean(0)}, {"valid_loss", valid_loss},
                                {"valid_rmse_ppm", valid_rmse}});
      std::printf("epoch %d: train loss (MSE, normalized) %.5f | validation RMSE %.3f ppm\n", epoch + 1,
                  totals.mean(0), valid_rmse);
    }

    // The test years, by the model and by the naive last-value forecast, both in ppm.
    const Forecasts test = forecast(test_loader, *model, split.normalizer, device);
    const double naive = data::naive_last_value_rmse(split.normalizer.inverse(split.test), windows);
    for (const std::string& file : train::write_training_curves(output.dir + "/timeseries", log))
      std::printf("wrote %s\n", file.c_str());

    // The forecast `horizon` weeks ahead against what was measured, week by week.
    const auto test_start = static_cast<size_t>(split.train.size(0) + split.valid.size(0));
    const size_t first_target = test_start + input_length + horizon - 1;  // row of window 0's last target
    train::Series truth{"measured", {}, {}};
    train::Series predicted{cell + ", " + std::to_string(horizon) + " weeks ahead", {}, {}};
    for (size_t w = 0; w < test_set->size(); ++w) {
      const double year = decimal_year(table.columns[0][first_target + w]);
      truth.x.push_back(year);
      truth.y.push_back(test.actual[w * horizon + horizon - 1]);
      predicted.x.push_back(year);
      predicted.y.push_back(test.predicted[w * horizon + horizon - 1]);
    }
    const std::string plot = output.dir + "/timeseries_test_forecast.svg";
    train::write_svg(plot, {truth, predicted},
                     {.title = "Mauna Loa CO2, test years", .x_label = "year", .y_label = "ppm"});
    std::printf("wrote %s\n", plot.c_str());

    summary.set("test_rmse_ppm", test.rmse());
    summary.set("naive_rmse_ppm", naive);
    summary.record_device_peak(device);
    std::printf("%s", summary.format("windows").c_str());
    std::printf("test RMSE over %zu windows x %zu weeks: %s %.3f ppm, naive last value %.3f ppm (%s)\n",
                test_set->size(), horizon, cell.c_str(), test.rmse(), naive,
                test.rmse() < naive ? "the model wins" : "the naive forecast wins");
    onnx_option.export_model<1>(model, {randn({3, 7, 1}).to(device)}, {"window"});  // (B, L, 1) normalized
    if (smoke_test && !examples::loss_fell(log)) return 1;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "timeseries: %s\n", e.what());
    return 2;
  }
  return 0;
}
