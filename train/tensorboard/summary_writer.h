// SummaryWriter: TensorBoard logs, as torch.utils.tensorboard.SummaryWriter writes them.
//
//   train::SummaryWriter tb("runs/exp1");
//   tb.add_scalar("loss/train", loss, step);
//   tb.add_scalars("loss", {{"train", tl}, {"test", vl}}, epoch);  // one chart, two lines
//   tb.add_text("config", "lr=3e-3, hidden=128", 0);
//   tb.add_histogram("fc.weight", model->fc->weight, epoch);
//   tb.close();  // or let the destructor do it
//
// then `tensorboard --logdir runs`. What is written, field for field as PyTorch 2.x:
// - add_scalar: a Summary.Value with the tag and simple_value (a float32, as TensorBoard
//   stores scalars), in the writer's own event file in log_dir.
// - add_scalars: each value under the tag main_tag, in an event file of its own in
//   log_dir/<main_tag with '/' made '_'>_<key>: TensorBoard shows these as runs, so the
//   keys draw as lines of one chart.
// - add_text: tag "<tag>/text_summary", a string tensor of shape (1) with the text, and
//   plugin_data plugin_name "text" (TensorBoard's Text tab; a reader's Tensors()).
// - add_histogram: a HistogramProto of the tensor's values (histogram.h: TensorBoard's
//   default bins, min, max, num, sum, sum_squares).
// Each event file, its buffering and its flushing are event_file.h's (flush_secs = 120).
// Threads may share one writer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/tensorboard/event_file.h"
#include "train/tensorboard/histogram.h"

namespace loom::train {

using SummaryWriterOptions = EventFileOptions;

class SummaryWriter {
 public:
  // Creates log_dir and its event file at once (SerializationError naming the path when it
  // can't); add_scalars' folders are created at their first value.
  explicit SummaryWriter(std::string log_dir, SummaryWriterOptions options = {});
  ~SummaryWriter() = default;  // the event files' destructors flush and close them

  // Tags must be non-empty (ValueError). Anything added after close() is a ValueError.
  void add_scalar(const std::string& tag, double value, int64_t step);
  void add_scalars(const std::string& main_tag, const std::map<std::string, double>& values, int64_t step);
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  // Any real dtype, shape and device; ValueError for an empty tensor (histogram.h).
  void add_histogram(const std::string& tag, const Tensor& values, int64_t step);
  void add_histogram(const std::string& tag, const Histogram& histogram, int64_t step);

  void flush();  // writes every event file's buffer
  void close();  // flush and close every event file; a second close() does nothing

  const std::string& log_dir() const { return log_dir_; }
  // The writer's event file, then add_scalars' (in the order of their folders).
  std::vector<std::string> paths() const;

 private:
  void write(EventFileWriter& file, const std::string& summary, int64_t step);
  EventFileWriter& scalars_file(const std::string& folder);

  std::string log_dir_;
  SummaryWriterOptions options_;
  std::unique_ptr<EventFileWriter> file_;
  std::map<std::string, std::unique_ptr<EventFileWriter>> scalars_files_;  // by folder
  bool closed_ = false;
  mutable std::mutex mutex_;  // guards scalars_files_ and closed_ (each file guards its own buffer)
};

}  // namespace loom::train
