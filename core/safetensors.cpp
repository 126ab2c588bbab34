#include "core/safetensors.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/factories.h"

namespace loom {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using json = nlohmann::json;

// Headers beyond this are refused (the reference implementation uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// No tensor's byte count (nor any offset arithmetic) comes near overflowing uint64_t.
constexpr uint64_t kMaxBytes = uint64_t(1) << 62;

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::Float64: return "F64";
    case DType::Float32: return "F32";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Int64: return "I64";
    case DType::Int32: return "I32";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

bool dtype_from_safetensors(const std::string& s, DType& out) {
  static const std::map<std::string, DType> table{{"F64", kFloat64}, {"F32", kFloat32}, {"F16", kFloat16},
                                                  {"BF16", kBFloat16}, {"I64", kInt64}, {"I32", kInt32},
                                                  {"BOOL", kBool}};
  auto it = table.find(s);
  if (it == table.end()) return false;
  out = it->second;
  return true;
}

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw SerializationError("safetensors: " + name + ": " + what);
}

struct Entry {
  std::string key;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& file, const std::string& key, const json& v) {
  const std::string where = "tensor '" + key + "'";
  if (!v.is_object()) fail(file, where + " is not a JSON object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field)) fail(file, where + " has no '" + field + "'");
  Entry e{key, kFloat32, {}, 0, 0};
  if (!v["dtype"].is_string()) fail(file, where + ": dtype is not a string");
  const std::string dt = v["dtype"].get<std::string>();
  if (!dtype_from_safetensors(dt, e.dtype))
    fail(file, where + ": unsupported dtype '" + dt + "' (Loom reads F64, F32, F16, BF16, I64, I32, BOOL)");
  if (!v["shape"].is_array()) fail(file, where + ": shape is not an array");
  // numel * element size, and the extent (the product of the sizes with zeros counted as
  // ones, which bounds the contiguous strides), must stay far from overflowing.
  const uint64_t elem = uint64_t(element_size(e.dtype));
  uint64_t numel = 1, extent = elem;
  for (const json& d : v["shape"]) {
    if (!d.is_number_unsigned()) fail(file, where + ": shape holds a non-integer or negative size");
    const uint64_t s = d.get<uint64_t>();
    if (s > kMaxBytes || extent > kMaxBytes / std::max<uint64_t>(s, 1)) fail(file, where + ": shape is too large");
    extent *= std::max<uint64_t>(s, 1);
    numel *= s;
    e.shape.push_back(int64_t(s));
  }
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(file, where + ": data_offsets must be two non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end) fail(file, where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] are reversed");
  const uint64_t nbytes = numel * elem;
  if (e.end - e.begin != nbytes)
    fail(file, where + ": shape " + shape_str(e.shape) + " of " + dt + " needs " + std::to_string(nbytes) +
                   " bytes but data_offsets span " + std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

std::string serialize_safetensors(const TensorMap& tensors, const Metadata& metadata) {
  json header = json::object();
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (const auto& [key, t] : tensors) {
    LOOM_CHECK(t.defined(), ValueError, "save_safetensors: tensor '", key, "' is undefined");
    LOOM_CHECK(key != "__metadata__", ValueError, "save_safetensors: '__metadata__' is reserved");
    Tensor host = t.detach().to(kCPU).contiguous();
    const uint64_t n = host.nbytes();
    header[key] = {{"dtype", safetensors_dtype(host.dtype())}, {"shape", host.sizes()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(host);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h;
  try {
    h = header.dump();
  } catch (const json::exception& e) {  // names and values must be valid UTF-8
    throw ValueError(std::string("save_safetensors: a tensor name or metadata entry is not valid UTF-8 (") + e.what() + ")");
  }
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t hn = h.size();
  std::memcpy(out.data(), &hn, 8);
  out += h;
  out.reserve(out.size() + offset);
  for (const Tensor& t : data)
    if (t.nbytes() > 0) out.append(static_cast<const char*>(t.data()), t.nbytes());
  return out;
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 8) fail(name, "truncated: " + std::to_string(bytes.size()) + " bytes, too short for the header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes) fail(name, "header length " + std::to_string(n) + " is larger than the limit of " + std::to_string(kMaxHeaderBytes));
  if (n > bytes.size() - 8)
    fail(name, "truncated: the header length " + std::to_string(n) + " exceeds the " + std::to_string(bytes.size() - 8) + " bytes after it");
  // nlohmann::json keeps the last of duplicate keys, so a file could say two things about
  // one tensor (the reference implementation refuses it): every object's keys are tracked
  // while parsing, and the first key seen twice in one object is reported.
  struct OpenObject {
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<OpenObject> open;
  std::string duplicate;
  const json::parser_callback_t track_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open.pop_back();
    } else if (event == json::parse_event_t::key && duplicate.empty()) {
      std::string key = parsed.get<std::string>();
      if (!open.back().keys.insert(key).second) {
        duplicate = "the key '" + key + "' appears twice in the header";
        if (open.size() > 1) duplicate += " (inside '" + open[open.size() - 2].last_key + "')";
      }
      open.back().last_key = std::move(key);
    }
    return true;
  };
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(n), track_keys, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail(name, "the header is not valid JSON");
  if (!duplicate.empty()) fail(name, duplicate);
  if (!header.is_object()) fail(name, "the header is not a JSON object");
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [key, v] : header.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) fail(name, "__metadata__ is not a JSON object");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) fail(name, "__metadata__ value of '" + mk + "' is not a string");
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, key, v));
  }
  // The tensors must tile the data section exactly: sorted by offset, each starts where
  // the previous ended (no overlap, no gap) and the last ends at the end of the file.
  const uint64_t data_size = bytes.size() - 8 - n;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin != expected)
      fail(name, "tensor '" + e.key + "' starts at byte " + std::to_string(e.begin) + " but " +
                     (previous ? "tensor '" + *previous + "' ends" : std::string("the data section starts")) + " at byte " +
                     std::to_string(expected) + (e.begin < expected ? " (overlapping data)" : " (a gap in the data)"));
    if (e.end > data_size)
      fail(name, "truncated: tensor '" + e.key + "' ends at byte " + std::to_string(e.end) + " but the data section has " +
                     std::to_string(data_size) + " bytes");
    expected = e.end;
    previous = &e.key;
  }
  if (expected != data_size)
    fail(name, "the data section has " + std::to_string(data_size) + " bytes but the tensors cover " + std::to_string(expected));
  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.data(), data + e.begin, e.end - e.begin);
    if (e.dtype == kBool) {  // only 0 and 1 are valid bools
      const uint8_t* p = static_cast<const uint8_t*>(t.data());
      for (int64_t i = 0; i < t.numel(); ++i)
        if (p[i] > 1) fail(name, "tensor '" + e.key + "' holds a bool byte other than 0 or 1");
    }
    out.tensors[e.key] = t;
  }
  return out;
}

namespace {

// Creates path.tmp.<pid>.<n> exclusively, with the permissions (0666 less the umask) that
// a plain new file would get; returns the descriptor and sets tmp.
int create_temp_beside(const std::string& path, std::string& tmp) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

// Note [stale temporaries]
// A save killed mid-write (SIGKILL, a crash, power loss) leaves its path.tmp.<pid>.<n>
// behind, and nothing else would ever remove it. So each save to path first removes the
// temporaries beside it whose process no longer exists (kill(pid, 0) fails with ESRCH).
// Left alone: this process's own (another thread may be saving), those of live processes
// (a save in progress), anything not named exactly path.tmp.<digits>.<digits>, and
// anything but a regular file. A process in another PID namespace writing to the same
// folder looks dead from here; a reused pid only delays a removal.
bool is_number(std::string_view s) {
  return !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void remove_stale_temporaries(const std::string& dir, const std::string& base) {
  const std::string prefix = base + ".tmp.";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == std::string_view::npos || !is_number(rest.substr(0, dot)) || !is_number(rest.substr(dot + 1))) continue;
    pid_t pid = 0;
    const auto [ptr, err] = std::from_chars(rest.data(), rest.data() + dot, pid);
    if (err != std::errc() || pid <= 0 || pid == ::getpid()) continue;
    std::error_code ignored;
    if (!it->is_regular_file(ignored) || it->is_symlink(ignored)) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(it->path().c_str());
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes, const std::string& what) {
  const auto fail = [&](const std::string& why) { throw SerializationError(what + ": " + path + ": " + why); };
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  remove_stale_temporaries(dir, path.substr(slash == std::string::npos ? 0 : slash + 1));
  std::string tmp;
  int fd = create_temp_beside(path, tmp);
  if (fd < 0) fail(std::string("cannot create a temporary file beside it: ") + std::strerror(errno));
  // On any failure the temporary file goes and the existing file at path stays as it was.
  auto abandon = [&](const std::string& step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail(step + ": " + std::strerror(err));
  };
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (w < 0) {
      if (errno == EINTR) continue;
      abandon("writing " + tmp + " failed after " + std::to_string(written) + " of " + std::to_string(bytes.size()) +
              " bytes");
    }
    written += size_t(w);
  }
  if (::fsync(fd) != 0) abandon("fsync of " + tmp + " failed");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("closing " + tmp + " failed");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) abandon("renaming " + tmp + " over it failed");
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata), "safetensors");
}

namespace {

// Why a file of type `mode` is refused: "is a FIFO, not a regular file", ...
std::string not_regular(mode_t mode) {
  const char* type = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISSOCK(mode) ? "a socket"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                                      : nullptr;
  return type ? std::string("is ") + type + ", not a regular file" : "not a regular file";
}

}  // namespace

std::string read_regular_file(const std::string& path, std::string& bytes) {
  // Note [no blocking open]: opening a FIFO for reading waits for a writer, possibly
  // forever, and opening a device may act on it; so the type is checked with stat before
  // the open, and again with fstat on what was opened (O_NONBLOCK, so that a regular file
  // swapped for a FIFO in between cannot block either).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string("cannot open: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  auto failed = [&](const std::string& why) {
    ::close(fd);
    return why;
  };
  if (::fstat(fd, &st) != 0) return failed(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return failed(not_regular(st.st_mode));
  bytes.assign(size_t(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {  // an error, or the file shrank while being read
      const int err = r < 0 ? errno : 0;
      return failed("read error after " + std::to_string(got) + " bytes" + (err ? std::string(": ") + std::strerror(err) : ""));
    }
    got += size_t(r);
  }
  ::close(fd);
  return {};
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::string bytes;
  const std::string why = read_regular_file(path, bytes);
  if (!why.empty()) fail(path, why);
  return parse_safetensors(bytes, path);
}

}  // namespace loom
