// EventFileWriter: one TensorBoard event file, events.out.tfevents.<time>.<host>.<pid>.<n>
// (the name TensorBoard's own writer, and so PyTorch's SummaryWriter, gives it: <time> is
// the Unix time in whole seconds, zero-padded to 10 digits, <n> counts the files this
// process opened, from 0). The file is a TFRecord file, one record per serialised Event:
//
//   uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
//
// all little-endian (crc32c.h has the mask). Records are framed whole in a memory buffer
// and written to the file, whole records at a time, when the buffer passes max_buffer_bytes,
// when flush_secs have passed since the last write (checked at each record: there is no
// background thread), and at flush(), close() and destruction. A crash mid-run so leaves
// a file of complete records, at worst followed by one cut short, which readers skip.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "train/metrics/progress.h"  // Clock

namespace loom::train {

struct EventFileOptions {
  double flush_secs = 120;               // PyTorch's default
  size_t max_buffer_bytes = 1 << 20;     // write sooner when this much is waiting
  std::string filename_suffix;           // appended to the file name, as PyTorch's
  Clock clock;                           // monotonic seconds for flush_secs; default steady clock
};

// The TFRecord framing of one record (above).
std::string tfrecord_frame(std::string_view data);

// This machine's name (gethostname), or "localhost": the event files' and the profiler
// traces' file names carry it, as TensorBoard's writers do.
std::string host_name();

// Seconds since the Unix epoch, with the fraction: an Event's wall_time.
double unix_time_seconds();

class EventFileWriter {
 public:
  // Creates log_dir if missing and the file in it, and writes the file's first record at
  // once: an Event with wall_time and file_version "brain.Event:2". Throws SerializationError naming the
  // path and the system's reason when either cannot be created.
  explicit EventFileWriter(const std::string& log_dir, EventFileOptions options = {});
  ~EventFileWriter();  // close(); an error there is printed to stderr (a destructor can't throw)
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Appends one serialised Event as a record. Thread-safe. ValueError after close().
  void write_record(std::string_view event);
  // Writes what is buffered. SerializationError naming the file when the write fails.
  void flush();
  void close();  // flush, then close the file; a second close() does nothing

  const std::string& path() const { return path_; }
  const std::string& log_dir() const { return log_dir_; }

 private:
  void write_buffer();  // with mutex_ held

  std::string log_dir_, path_;
  EventFileOptions options_;
  int fd_ = -1;
  std::string buffer_;
  double last_write_ = 0;
  std::mutex mutex_;
};

}  // namespace loom::train
