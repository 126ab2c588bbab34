#include "core/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/factories.h"

namespace loom {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using json = nlohmann::json;

// Headers beyond this are refused (the reference implementation uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

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
  uint64_t numel = 1;
  for (const json& d : v["shape"]) {
    if (!d.is_number_unsigned()) fail(file, where + ": shape holds a non-integer or negative size");
    const uint64_t s = d.get<uint64_t>();
    if (s > uint64_t(std::numeric_limits<int64_t>::max()) || (s != 0 && numel > (uint64_t(1) << 62) / s))
      fail(file, where + ": shape is too large");
    numel *= s;
    e.shape.push_back(int64_t(s));
  }
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(file, where + ": data_offsets must be two non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end) fail(file, where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] are reversed");
  const uint64_t nbytes = numel * uint64_t(element_size(e.dtype));
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
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t hn = h.size();
  std::memcpy(out.data(), &hn, 8);
  out += h;
  out.reserve(out.size() + offset);
  for (const Tensor& t : data) out.append(static_cast<const char*>(t.data()), t.nbytes());
  return out;
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 8) fail(name, "truncated: " + std::to_string(bytes.size()) + " bytes, too short for the header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes) fail(name, "header length " + std::to_string(n) + " is larger than the limit of " + std::to_string(kMaxHeaderBytes));
  if (n > bytes.size() - 8)
    fail(name, "truncated: the header length " + std::to_string(n) + " exceeds the " + std::to_string(bytes.size() - 8) + " bytes after it");
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(n), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail(name, "the header is not valid JSON");
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
  for (const Entry& e : entries) {
    if (e.begin != expected)
      fail(name, "tensor '" + e.key + "' starts at byte " + std::to_string(e.begin) + " but the previous tensor ends at " +
                     std::to_string(expected) + (e.begin < expected ? " (overlapping data)" : " (a gap in the data)"));
    if (e.end > data_size)
      fail(name, "truncated: tensor '" + e.key + "' ends at byte " + std::to_string(e.end) + " but the data section has " +
                     std::to_string(data_size) + " bytes");
    expected = e.end;
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

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  const std::string bytes = serialize_safetensors(tensors, metadata);
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) fail(path, std::string("cannot create a temporary file beside it: ") + std::strerror(errno));
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what + ": " + std::strerror(err));
  };
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (w < 0) {
      if (errno == EINTR) continue;
      abandon("write failed");
    }
    written += size_t(w);
  }
  if (::fsync(fd) != 0) abandon("fsync failed");
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    fail(path, std::string("close failed: ") + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, std::string("rename failed: ") + std::strerror(err));
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "read error");
  return parse_safetensors(bytes, path);
}

}  // namespace loom
