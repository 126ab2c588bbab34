// RunSummary: see run_summary.h.
#include "train/metrics/run_summary.h"

#include "core/cuda.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"

namespace loom::train {

namespace {

std::string seconds_text(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

std::string metric_text(double v) {
  if (std::isnan(v)) return "nan";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string format_bytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, unit >= 2 ? "%.2f %s" : "%.1f %s", v, kUnits[unit]);
  return buf;
}

RunSummary::RunSummary(Clock clock) : clock_(std::move(clock)) {
  if (!clock_) clock_ = steady_clock_seconds();
  start_ = clock_();
}

void RunSummary::start_epoch() {
  LOOM_CHECK(!epoch_start_, ValueError, "RunSummary: start_epoch() called twice without end_epoch() (epoch ",
             epochs() + 1, ")");
  epoch_start_ = clock_();
}

void RunSummary::end_epoch(size_t items) {
  LOOM_CHECK(epoch_start_, ValueError, "RunSummary: end_epoch() without start_epoch() (after epoch ", epochs(), ")");
  epoch_seconds_.push_back(std::max(0.0, clock_() - *epoch_start_));
  items_ += items;
  epoch_start_.reset();
}

void RunSummary::set(std::string key, double value) {
  for (auto& kv : metrics_) {
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  }
  metrics_.emplace_back(std::move(key), value);
}

void RunSummary::set_peak_device_memory(size_t bytes, std::string device_name) {
  device_peak_ = {std::move(device_name), bytes};
}

void RunSummary::record_device_peak(Device device) {
  if (device.is_cuda())
    set_peak_device_memory(cuda::max_memory_allocated(device.index), cuda::device_name(device.index));
}

size_t RunSummary::peak_host_memory_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
#if defined(__APPLE__)
  return static_cast<size_t>(usage.ru_maxrss);  // bytes on macOS
#else
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
#endif
}

double RunSummary::total_seconds() const { return std::max(0.0, clock_() - start_); }

double RunSummary::items_per_second() const {
  const double in_epochs = std::accumulate(epoch_seconds_.begin(), epoch_seconds_.end(), 0.0);
  return in_epochs > 0 ? static_cast<double>(items_) / in_epochs : 0.0;
}

std::string RunSummary::format(std::string_view item_name) const {
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("epochs", std::to_string(epochs()));
  const double total = total_seconds();
  lines.emplace_back("total time", format_duration(total) + " (" + seconds_text(total) + " s)");
  if (epochs() > 0) {
    const double mean =
        std::accumulate(epoch_seconds_.begin(), epoch_seconds_.end(), 0.0) / static_cast<double>(epochs());
    std::string per_epoch = seconds_text(mean) + " s mean";
    if (epochs() <= 10) {
      per_epoch += ":";
      for (double s : epoch_seconds_) per_epoch.append(" ").append(seconds_text(s));
      per_epoch += " s";
    }
    lines.emplace_back("time per epoch", per_epoch);
  }
  if (items_ > 0) {
    const std::string unit(item_name);
    lines.emplace_back("throughput", format_count(items_per_second()) + " " + unit + "/s (" +
                                         format_count(static_cast<double>(items_)) + " " + unit + ")");
  }
  std::string memory = "host " + format_bytes(peak_host_memory_bytes());
  if (device_peak_) memory += ", " + device_peak_->first + " " + format_bytes(device_peak_->second);
  lines.emplace_back("peak memory", memory);
  for (const auto& [key, value] : metrics_) lines.emplace_back(key, metric_text(value));

  size_t width = 0;
  for (const auto& line : lines) width = std::max(width, line.first.size());
  std::string out;
  for (const auto& [label, text] : lines) out += "  " + label + std::string(width + 2 - label.size(), ' ') + text + "\n";
  return out;
}

std::string RunSummary::to_json() const {
  nlohmann::json j;
  j["epochs"] = epochs();
  j["epoch_seconds"] = epoch_seconds_;
  j["total_seconds"] = total_seconds();
  j["items"] = items_;
  j["items_per_second"] = items_per_second();
  j["peak_host_memory_bytes"] = peak_host_memory_bytes();
  if (device_peak_) {
    j["peak_device_memory"] = {{"device", device_peak_->first}, {"bytes", device_peak_->second}};
  } else {
    j["peak_device_memory"] = nullptr;
  }
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [key, value] : metrics_) {
    if (std::isfinite(value)) {
      metrics[key] = value;
    } else {
      metrics[key] = nullptr;  // JSON has no NaN
    }
  }
  j["metrics"] = metrics;
  return j.dump();
}

}  // namespace loom::train
