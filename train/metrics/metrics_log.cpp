// MetricsLog: see metrics_log.h.
#include "train/metrics/metrics_log.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

// The shortest text that reads back as exactly v (std::to_chars' guarantee).
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";  // not "-nan"
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

std::string join(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
  return s + "]";
}

std::vector<std::string> keys_of(const Values& values) {
  std::vector<std::string> keys;
  for (const auto& kv : values) keys.push_back(kv.first);
  return keys;
}

}  // namespace

std::optional<double> Row::get(std::string_view key) const {
  for (const auto& [k, v] : values) {
    if (k == key) return v;
  }
  return std::nullopt;
}

MetricsLog::MetricsLog(const std::string& dir, std::string name, Clock clock)
    : name_(std::move(name)), clock_(std::move(clock)) {
  LOOM_CHECK(!name_.empty() && name_ != "." && name_ != ".." && name_.find('/') == std::string::npos &&
                 name_.find('\\') == std::string::npos,
             ValueError, "MetricsLog: the run name must be a plain file name, got '", name_, "'");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw SerializationError("MetricsLog: cannot create directory '" + dir + "': " + ec.message());
  if (!clock_) clock_ = steady_clock_seconds();
  start_ = clock_();
  open(steps_, dir, "steps", true);
  open(epochs_, dir, "epochs", false);
}

void MetricsLog::open(Table& t, const std::string& dir, const std::string& kind, bool has_step) {
  t.kind = kind;
  t.has_step = has_step;
  t.csv_path = (fs::path(dir) / (name_ + "_" + kind + ".csv")).string();
  t.jsonl_path = (fs::path(dir) / (name_ + "_" + kind + ".jsonl")).string();
  for (auto [stream, path] : {std::pair{&t.csv, &t.csv_path}, std::pair{&t.jsonl, &t.jsonl_path}}) {
    errno = 0;
    stream->open(*path, std::ios::out | std::ios::trunc);
    if (!*stream) {
      throw SerializationError("MetricsLog: cannot open '" + *path + "' for writing: " +
                               (errno ? std::strerror(errno) : "unknown error"));
    }
  }
}

void MetricsLog::log_step(size_t epoch, size_t step, const Values& values) {
  append(steps_, Row{epoch, step, clock_() - start_, values});
  if (tensorboard_) {
    for (const auto& [k, v] : values) tensorboard_->add_scalar("step/" + k, v, static_cast<int64_t>(step));
  }
}

void MetricsLog::log_epoch(size_t epoch, const Values& values) {
  append(epochs_, Row{epoch, 0, clock_() - start_, values});
  if (tensorboard_) {
    for (const auto& [k, v] : values) tensorboard_->add_scalar("epoch/" + k, v, static_cast<int64_t>(epoch));
  }
  flush();
}

void MetricsLog::flush() {
  for (Table* t : {&steps_, &epochs_}) {
    t->csv.flush();
    t->jsonl.flush();
    check_written(*t);
  }
  if (tensorboard_) tensorboard_->flush();
}

void MetricsLog::write_tensorboard(const std::string& log_dir) {
  tensorboard_ = std::make_unique<SummaryWriter>(log_dir);
}

std::vector<std::string> MetricsLog::paths() const {
  return {steps_.csv_path, steps_.jsonl_path, epochs_.csv_path, epochs_.jsonl_path};
}

void MetricsLog::append(Table& t, Row row) {
  const std::string where = "MetricsLog '" + name_ + "' " + t.kind;
  std::vector<std::string> keys = keys_of(row.values);
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    LOOM_CHECK(!k.empty() && k.find_first_of(",\"\n\r") == std::string::npos, ValueError, where,
               ": key '", k, "' must be non-empty without commas, quotes or line breaks (a CSV column name)");
    LOOM_CHECK(k != "epoch" && k != "step" && k != "time_s", ValueError, where, ": key '", k,
               "' is a column the log writes itself");
    for (size_t j = 0; j < i; ++j) LOOM_CHECK(keys[j] != k, ValueError, where, ": key '", k, "' given twice");
  }
  if (t.rows.empty()) {
    t.keys = keys;
    t.csv << "epoch," << (t.has_step ? "step," : "") << "time_s";
    for (const std::string& k : keys) t.csv << ',' << k;
    t.csv << '\n';
  } else {
    LOOM_CHECK(keys == t.keys, ValueError, where, ": expected keys ", join(t.keys), " (the columns of the first row), given ",
               join(keys), "; a CSV can't change columns");
  }

  t.csv << row.epoch << ',';
  if (t.has_step) t.csv << row.step << ',';
  t.csv << number_text(row.time_s);
  for (const auto& kv : row.values) t.csv << ',' << number_text(kv.second);
  t.csv << '\n';

  // ordered_json keeps the column order; JSON has no NaN or infinity, so those are null.
  nlohmann::ordered_json line;
  line["epoch"] = row.epoch;
  if (t.has_step) line["step"] = row.step;
  line["time_s"] = row.time_s;
  for (const auto& [k, v] : row.values) {
    if (std::isfinite(v)) {
      line[k] = v;
    } else {
      line[k] = nullptr;
    }
  }
  t.jsonl << line.dump() << '\n';
  check_written(t);
  t.rows.push_back(std::move(row));
}

void MetricsLog::check_written(const Table& t) const {
  for (auto [stream, path] : {std::pair{&t.csv, &t.csv_path}, std::pair{&t.jsonl, &t.jsonl_path}}) {
    if (!*stream) {
      throw SerializationError("MetricsLog: writing '" + *path + "' failed: " +
                               (errno ? std::strerror(errno) : "unknown error"));
    }
  }
}

}  // namespace loom::train
