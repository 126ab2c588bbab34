// EventFileWriter: see event_file.h.
#include "train/tensorboard/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "train/tensorboard/crc32c.h"
#include "train/tensorboard/protobuf_writer.h"

namespace loom::train {

namespace {

void append_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}


// The <n> of the file name: files opened by this process, as TensorBoard's global uid.
std::atomic<long> files_opened{0};

std::string event_file_name(const std::string& suffix) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(now).count()));
  return "events.out.tfevents." + std::string(seconds) + "." + host_name() + "." + std::to_string(getpid()) + "." +
         std::to_string(files_opened++) + suffix;
}

// The Event that opens every event file (tensorboard/compat/proto/event.proto): wall_time = 1,
// file_version = 3, source_metadata = 10 { writer = 1 }.
std::string file_version_event() {
  ProtoWriter source;
  source.bytes_field(1, "loom.train.SummaryWriter");
  ProtoWriter event;
  event.double_field(1, unix_time_seconds());
  event.bytes_field(3, "brain.Event:2");
  event.message_field(10, source);
  return event.bytes();
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

double unix_time_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string tfrecord_frame(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  append_u64(record, data.size());
  append_u32(record, mask_crc32c(crc32c(record)));  // of the 8 length bytes
  record.append(data);
  append_u32(record, mask_crc32c(crc32c(data)));
  return record;
}

EventFileWriter::EventFileWriter(const std::string& log_dir, EventFileOptions options)
    : log_dir_(log_dir), options_(std::move(options)) {
  LOOM_CHECK(!log_dir_.empty(), ValueError, "SummaryWriter: the log directory is empty");
  LOOM_CHECK(options_.flush_secs >= 0, ValueError, "SummaryWriter: flush_secs must be >= 0, got ", options_.flush_secs);
  LOOM_CHECK(options_.filename_suffix.find('/') == std::string::npos, ValueError,
             "SummaryWriter: filename_suffix '", options_.filename_suffix, "' has a path separator");
  if (!options_.clock) options_.clock = steady_clock_seconds();
  std::error_code ec;
  std::filesystem::create_directories(log_dir_, ec);
  if (ec) throw SerializationError("SummaryWriter: cannot create directory '" + log_dir_ + "': " + ec.message());
  path_ = (std::filesystem::path(log_dir_) / event_file_name(options_.filename_suffix)).string();
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw SerializationError("SummaryWriter: cannot create '" + path_ + "': " + std::strerror(errno));
  last_write_ = options_.clock();
  try {
    write_record(file_version_event());
    flush();  // the file is an event file from the start, as TensorBoard's writer makes it
  } catch (...) {
    ::close(fd_);  // the destructor of a half-made object does not run
    throw;
  }
}

EventFileWriter::~EventFileWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: %s\n", e.what());
  }
}

void EventFileWriter::write_record(std::string_view event) {
  std::lock_guard lock(mutex_);
  LOOM_CHECK(fd_ >= 0, ValueError, "SummaryWriter: '", path_, "' is closed; nothing can be added after close()");
  buffer_ += tfrecord_frame(event);
  if (buffer_.size() >= options_.max_buffer_bytes || options_.clock() - last_write_ >= options_.flush_secs) {
    write_buffer();
  }
}

void EventFileWriter::flush() {
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) write_buffer();
}

void EventFileWriter::close() {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) return;
  // The descriptor is closed even when the last write fails, and that error still reported.
  struct Closer {
    int& fd;
    ~Closer() {
      ::close(fd);
      fd = -1;
    }
  } closer{fd_};
  write_buffer();
}

void EventFileWriter::write_buffer() {
  last_write_ = options_.clock();
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = n < 0 ? std::strerror(errno) : "no bytes written";
      buffer_.erase(0, done);  // a retry writes only what is still missing
      throw SerializationError("SummaryWriter: writing '" + path_ + "' failed: " + reason);
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

}  // namespace loom::train
