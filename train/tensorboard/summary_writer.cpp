// SummaryWriter: see summary_writer.h. The field numbers are those of TensorBoard's
// protos (tensorboard/compat/proto/{event,summary,tensor,tensor_shape,types}.proto).
#include "train/tensorboard/summary_writer.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "train/tensorboard/protobuf_writer.h"

namespace loom::train {

namespace {

// Event
constexpr int kEventWallTime = 1, kEventStep = 2, kEventSummary = 5;
// Summary { repeated Value value = 1; }
constexpr int kSummaryValue = 1;
// Summary.Value
constexpr int kValueTag = 1, kValueSimpleValue = 2, kValueHisto = 5, kValueTensor = 8, kValueMetadata = 9;
// HistogramProto
constexpr int kHistoMin = 1, kHistoMax = 2, kHistoNum = 3, kHistoSum = 4, kHistoSumSquares = 5,
              kHistoBucketLimit = 6, kHistoBucket = 7;
// SummaryMetadata { PluginData plugin_data = 1; } and PluginData { string plugin_name = 1; }
constexpr int kMetadataPluginData = 1, kPluginName = 1;
// TensorProto, TensorShapeProto { repeated Dim dim = 2; }, Dim { int64 size = 1; }
constexpr int kTensorDType = 1, kTensorShape = 2, kTensorStringVal = 8, kShapeDim = 2, kDimSize = 1;
constexpr uint64_t kDTString = 7;  // types.proto DT_STRING

// A Summary of one Value.
std::string summary_of(const ProtoWriter& value) {
  ProtoWriter summary;
  summary.message_field(kSummaryValue, value);
  return summary.bytes();
}

void check_tag(const std::string& tag, const char* op) {
  LOOM_CHECK(!tag.empty(), ValueError, "SummaryWriter::", op, ": the tag is empty");
}

std::string scalar_summary(const std::string& tag, double value) {
  ProtoWriter v;
  v.bytes_field(kValueTag, tag);
  v.float_field(kValueSimpleValue, static_cast<float>(value));
  return summary_of(v);
}

}  // namespace

SummaryWriter::SummaryWriter(std::string log_dir, SummaryWriterOptions options)
    : log_dir_(std::move(log_dir)), options_(std::move(options)),
      file_(std::make_unique<EventFileWriter>(log_dir_, options_)) {}

void SummaryWriter::write(EventFileWriter& file, const std::string& summary, int64_t step) {
  {
    std::lock_guard lock(mutex_);
    LOOM_CHECK(!closed_, ValueError, "SummaryWriter '", log_dir_, "': closed; nothing can be added after close()");
  }
  ProtoWriter event;
  event.double_field(kEventWallTime, unix_time_seconds());
  event.varint_field(kEventStep, static_cast<uint64_t>(step));
  event.bytes_field(kEventSummary, summary);
  file.write_record(event.bytes());
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  check_tag(tag, "add_scalar");
  write(*file_, scalar_summary(tag, value), step);
}

void SummaryWriter::add_scalars(const std::string& main_tag, const std::map<std::string, double>& values,
                                int64_t step) {
  check_tag(main_tag, "add_scalars");
  for (const auto& [key, value] : values) {
    LOOM_CHECK(!key.empty(), ValueError, "SummaryWriter::add_scalars '", main_tag, "': a key is empty");
    std::string folder = main_tag;
    std::replace(folder.begin(), folder.end(), '/', '_');
    folder = (std::filesystem::path(log_dir_) / (folder + "_" + key)).string();
    write(scalars_file(folder), scalar_summary(main_tag, value), step);
  }
}

EventFileWriter& SummaryWriter::scalars_file(const std::string& folder) {
  std::lock_guard lock(mutex_);
  LOOM_CHECK(!closed_, ValueError, "SummaryWriter '", log_dir_, "': closed; nothing can be added after close()");
  std::unique_ptr<EventFileWriter>& file = scalars_files_[folder];
  if (!file) {
    try {
      file = std::make_unique<EventFileWriter>(folder, options_);
    } catch (...) {
      scalars_files_.erase(folder);  // no empty entry left behind
      throw;
    }
  }
  return *file;
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  check_tag(tag, "add_text");
  ProtoWriter plugin;
  plugin.bytes_field(kPluginName, "text");  // content: TextPluginData{version=0}, which encodes as nothing
  ProtoWriter metadata;
  metadata.message_field(kMetadataPluginData, plugin);
  ProtoWriter dim;
  dim.varint_field(kDimSize, 1);
  ProtoWriter shape;
  shape.message_field(kShapeDim, dim);
  ProtoWriter tensor;
  tensor.varint_field(kTensorDType, kDTString);
  tensor.message_field(kTensorShape, shape);
  tensor.bytes_field(kTensorStringVal, text);
  ProtoWriter v;
  v.bytes_field(kValueTag, tag + "/text_summary");
  v.message_field(kValueMetadata, metadata);
  v.message_field(kValueTensor, tensor);
  write(*file_, summary_of(v), step);
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step) {
  check_tag(tag, "add_histogram");
  LOOM_CHECK(values.numel() > 0, ValueError, "SummaryWriter::add_histogram '", tag, "': the tensor is empty");
  LOOM_CHECK(values.dtype() != DType::Bool, DTypeError, "SummaryWriter::add_histogram '", tag,
             "': a histogram needs numbers, got a Bool tensor");
  add_histogram(tag, make_histogram(values.to_vector<double>()), step);
}

void SummaryWriter::add_histogram(const std::string& tag, const Histogram& h, int64_t step) {
  check_tag(tag, "add_histogram");
  LOOM_CHECK(h.bucket_limit.size() == h.bucket.size(), ValueError, "SummaryWriter::add_histogram '", tag, "': ",
             h.bucket_limit.size(), " bucket limits but ", h.bucket.size(), " buckets");
  ProtoWriter histo;
  histo.double_field(kHistoMin, h.min);
  histo.double_field(kHistoMax, h.max);
  histo.double_field(kHistoNum, h.num);
  histo.double_field(kHistoSum, h.sum);
  histo.double_field(kHistoSumSquares, h.sum_squares);
  histo.packed_doubles_field(kHistoBucketLimit, h.bucket_limit);
  histo.packed_doubles_field(kHistoBucket, h.bucket);
  ProtoWriter v;
  v.bytes_field(kValueTag, tag);
  v.message_field(kValueHisto, histo);
  write(*file_, summary_of(v), step);
}

void SummaryWriter::flush() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  file_->flush();
  for (auto& [folder, file] : scalars_files_) file->flush();
}

void SummaryWriter::close() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  closed_ = true;
  // Every file is closed even if one fails; the first failure is reported.
  std::exception_ptr first_error;
  auto close_one = [&](EventFileWriter& file) {
    try {
      file.close();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  };
  close_one(*file_);
  for (auto& [folder, file] : scalars_files_) close_one(*file);
  if (first_error) std::rethrow_exception(first_error);
}

std::vector<std::string> SummaryWriter::paths() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out{file_->path()};
  for (const auto& [folder, file] : scalars_files_) out.push_back(file->path());
  return out;
}

}  // namespace loom::train
