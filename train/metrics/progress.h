// ProgressBar: a training loop's live status line, as Python's tqdm.
//
//   train::ProgressBar bar("epoch 3/10", loader.size());
//   for (auto& batch : loader) {
//     ...
//     bar.update(1, {{"loss", loss.item<double>()}}, batch_tokens);
//   }
//   bar.close();  // or let the destructor do it
//
// On a terminal the line is redrawn in place ('\r', at most every min_interval_s):
//   epoch 3/10 [########............] 120/300 loss=0.4321 acc=0.81 12.3k items/s elapsed 00:09 eta 00:14
// Anywhere else (a log file, CI, a pipe) '\r' redraws would be one huge line, so the bar
// prints a plain '\n'-terminated line, without the bar, every plain_interval_s seconds and
// once at the end: no '\r' and no ANSI codes.
#pragma once

#include <cstddef>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::train {

// Seconds on a monotonic clock; tests inject a fake one.
using Clock = std::function<double()>;
Clock steady_clock_seconds();

// Named values shown after the counts ("loss=0.4321 acc=0.81"), in the given order.
using Postfix = std::vector<std::pair<std::string, double>>;

struct ProgressOptions {
  std::ostream* out = &std::cout;   // examples print everything to stdout
  std::optional<bool> interactive;  // unset: isatty() when out is std::cout/std::cerr, else false
  double min_interval_s = 0.1;      // interactive: the fastest redraw rate
  double plain_interval_s = 10.0;   // plain: one line every this many seconds
  size_t bar_width = 20;            // interactive: characters inside [...]
  std::string item_name = "items";  // throughput unit: "12.3k tokens/s"; steps/s when no items
  Clock clock;                      // unset: steady_clock_seconds()
};

class ProgressBar {
 public:
  // total_steps 0 means unknown: no bar and no ETA.
  ProgressBar(std::string description, size_t total_steps, ProgressOptions options = {});
  ~ProgressBar();  // close()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Records `steps` more steps done and `items` (samples, tokens) processed by them. An
  // empty postfix keeps the one shown last. Draws if the throttle allows.
  void update(size_t steps = 1, const Postfix& postfix = {}, size_t items = 0);
  // Draws the final line (totals, no ETA) and ends it with '\n'. Idempotent.
  void close();

  // The status line as it would be drawn now, without '\r' or '\n'.
  std::string line() const;
  bool interactive() const { return interactive_; }
  size_t steps_done() const { return done_; }
  size_t items_done() const { return items_; }

 private:
  std::string render(double now, bool final) const;
  void draw(const std::string& text);

  std::string description_;
  size_t total_;
  ProgressOptions options_;
  std::ostream* out_;
  bool interactive_;
  double start_;
  double last_draw_;
  size_t done_ = 0;
  size_t items_ = 0;
  Postfix postfix_;
  size_t last_width_ = 0;  // interactive: length of the line on screen, to erase leftovers
  bool closed_ = false;
};

// The formatting the bar uses, shared with RunSummary.
// 3 significant digits with a k/M/G/T suffix: 512, 3.50, 12.3k, 1.28M.
std::string format_count(double value);
// Whole seconds as mm:ss, or h:mm:ss from an hour up: 00:09, 59:59, 1:02:05.
std::string format_duration(double seconds);
// 4 significant digits, as printf's %.4g: 0.4321, 0.81, 1.235e+04, nan.
std::string format_value(double value);

}  // namespace loom::train
