// ProgressBar: see progress.h.
#include "train/metrics/progress.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/error.h"

namespace loom::train {

Clock steady_clock_seconds() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
}

namespace {

// Only the process's own stdout/stderr can be asked whether they are a terminal.
bool is_terminal(const std::ostream* out) {
  if (out == &std::cout) return isatty(STDOUT_FILENO) == 1;
  if (out == &std::cerr || out == &std::clog) return isatty(STDERR_FILENO) == 1;
  return false;
}

}  // namespace

std::string format_count(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  static constexpr std::array<const char*, 5> kSuffixes = {"", "k", "M", "G", "T"};
  size_t i = 0;
  // 999.5 would print as "1000" with 3 significant digits: it is 1.00k.
  while (std::abs(value) >= 999.5 && i + 1 < kSuffixes.size()) {
    value /= 1000.0;
    ++i;
  }
  const double a = std::abs(value);
  const int decimals = a < 9.995 ? 2 : a < 99.95 ? 1 : 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, value, kSuffixes[i]);
  return buf;
}

std::string format_duration(double seconds) {
  if (!(seconds > 0)) seconds = 0;  // also NaN
  const long long s = static_cast<long long>(std::floor(seconds));
  char buf[64];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s % 3600 / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "nan";  // printf may say "-nan"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

ProgressBar::ProgressBar(std::string description, size_t total_steps, ProgressOptions options)
    : description_(std::move(description)), total_(total_steps), options_(std::move(options)) {
  LOOM_CHECK(std::isfinite(options_.min_interval_s) && options_.min_interval_s >= 0, ValueError,
             "ProgressBar: min_interval_s must be a finite number >= 0, got ", options_.min_interval_s);
  LOOM_CHECK(std::isfinite(options_.plain_interval_s) && options_.plain_interval_s >= 0, ValueError,
             "ProgressBar: plain_interval_s must be a finite number >= 0, got ", options_.plain_interval_s);
  LOOM_CHECK(options_.bar_width >= 1 && options_.bar_width <= 1000, ValueError,
             "ProgressBar: bar_width must be in [1, 1000], got ", options_.bar_width);
  LOOM_CHECK(options_.out != nullptr, ValueError, "ProgressBar: out must be a stream, got nullptr");
  out_ = options_.out;
  interactive_ = options_.interactive.value_or(is_terminal(out_));
  if (!options_.clock) options_.clock = steady_clock_seconds();
  start_ = last_draw_ = options_.clock();
  if (interactive_) draw(render(start_, false));  // show the empty bar right away
}

ProgressBar::~ProgressBar() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; a failing clock or stream loses the last line only.
  }
}

void ProgressBar::update(size_t steps, const Postfix& postfix, size_t items) {
  LOOM_CHECK(!closed_, ValueError, "ProgressBar '", description_, "': update() after close()");
  done_ += steps;
  items_ += items;
  if (!postfix.empty()) postfix_ = postfix;
  const double now = options_.clock();
  const double interval = interactive_ ? options_.min_interval_s : options_.plain_interval_s;
  if (now - last_draw_ >= interval) {
    draw(render(now, false));
    last_draw_ = now;
  }
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  draw(render(options_.clock(), true));
  if (interactive_) {
    *out_ << '\n';
    out_->flush();
  }
}

std::string ProgressBar::line() const { return render(options_.clock(), false); }

std::string ProgressBar::render(double now, bool final) const {
  const double elapsed = std::max(0.0, now - start_);
  std::string s = description_;
  auto add = [&s](const std::string& part) {
    if (!s.empty()) s += ' ';
    s += part;
  };
  if (interactive_ && total_ > 0) {
    const double fraction = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const size_t filled = static_cast<size_t>(fraction * static_cast<double>(options_.bar_width));
    std::string bar(options_.bar_width + 2, '.');
    bar.front() = '[';
    bar.back() = ']';
    std::fill_n(bar.begin() + 1, filled, '#');
    add(bar);
  }
  add(total_ > 0 ? std::to_string(done_) + "/" + std::to_string(total_) : std::to_string(done_));
  for (const auto& [name, value] : postfix_) add(name + "=" + format_value(value));
  if (elapsed > 0) {
    if (items_ > 0) {
      add(format_count(static_cast<double>(items_) / elapsed) + " " + options_.item_name + "/s");
    } else {
      add(format_count(static_cast<double>(done_) / elapsed) + " steps/s");
    }
  }
  add("elapsed " + format_duration(elapsed));
  if (final) {
    if (items_ > 0) add("total " + format_count(static_cast<double>(items_)) + " " + options_.item_name);
  } else if (total_ > 0) {
    if (done_ == 0) {
      add("eta ?");
    } else {
      const double remaining = done_ >= total_ ? 0.0 : static_cast<double>(total_ - done_);
      add("eta " + format_duration(elapsed / static_cast<double>(done_) * remaining));
    }
  }
  return s;
}

void ProgressBar::draw(const std::string& text) {
  if (interactive_) {
    // Spaces over whatever is left of a longer previous line.
    const size_t pad = last_width_ > text.size() ? last_width_ - text.size() : 0;
    *out_ << '\r' << text << std::string(pad, ' ');
    last_width_ = text.size();
  } else {
    *out_ << text << '\n';
  }
  out_->flush();
}

}  // namespace loom::train
