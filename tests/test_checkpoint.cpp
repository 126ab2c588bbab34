// Checkpoints: the safetensors format (every dtype, 0-dim, empty and non-contiguous
// tensors, metadata, the byte layout read back independently), one corrupt file per
// check of the hostile-input parser (each a SerializationError naming the file and the
// tensor), atomic saves that fail part-way, and training checkpoints (model + Adam +
// StepLR + step/epoch + RNG) that resume bit-identically.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "interop/tiny_lm.h"
#include "nn/loss.h"
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace fs = std::filesystem;

namespace {

// ---- files --------------------------------------------------------------------------------------

using loom::test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file by hand: the 8-byte little-endian header length, the header, the data.
std::string make_file(const std::string& header, const std::string& data, uint64_t header_length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((header_length >> (8 * i)) & 0xff);
  return out + header + data;
}
std::string make_file(const std::string& header, const std::string& data) {
  return make_file(header, data, header.size());
}

// The raw bytes of t in row-major order.
std::string raw_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data()), c.nbytes());
}

void require_same_tensor(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  REQUIRE(got.is_cpu());
  REQUIRE(raw_bytes(got) == raw_bytes(want));  // bit for bit
}

Tensor random_of(const Shape& shape, DType dtype) {
  if (dtype == kBool) return random_nonzero(shape) > 0.0;
  return random_nonzero(shape, dtype, -100, 100);
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};
  return v;
}

}  // namespace

// ---- round trips ------------------------------------------------------------------------------------

TEST_CASE("safetensors round-trips every dtype, 0-dim, empty and non-contiguous tensors, and metadata",
          "[checkpoint]") {
  TempDir dir;
  TensorMap tensors;
  for (DType dt : all_dtypes()) {
    const std::string n = dtype_name(dt);
    tensors[n + ".matrix"] = random_of({3, 4}, dt);
    tensors[n + ".scalar"] = random_of({}, dt);
    tensors[n + ".empty"] = random_of({0, 3}, dt);
    tensors[n + ".transposed"] = random_of({3, 5}, dt).t();             // (5, 3), strides (1, 5)
    tensors[n + ".sliced"] = random_of({4, 6}, dt).slice(1, 1, 6, 2);   // (4, 3), step 2
    tensors[n + ".expanded"] = random_of({1, 3}, dt).expand({2, 3});    // stride 0
  }
  REQUIRE_FALSE(tensors["float32.transposed"].is_contiguous());
  REQUIRE_FALSE(tensors["int32.sliced"].is_contiguous());
  const Metadata metadata{{"format", "pt"}, {"note", "caf\xc3\xa9 \xe2\x9c\x93"}, {"empty", ""}};

  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, tensors, metadata);
  SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.size() == tensors.size());
  for (const auto& [key, t] : tensors) require_same_tensor(f.tensors.at(key), t, key);
  REQUIRE(f.metadata == metadata);

  // The same bytes in memory, and no metadata when none is given.
  REQUIRE(serialize_safetensors(tensors, metadata) == read_bytes(path));
  SafetensorsFile m = parse_safetensors(serialize_safetensors({{"x", random_of({2}, kInt64)}}));
  REQUIRE(m.metadata.empty());
  REQUIRE(m.tensors.size() == 1);
  REQUIRE(dir.names() == std::vector<std::string>{"all.safetensors"});  // no temporary left
}

TEST_CASE("safetensors files follow the format: header length, JSON entries, aligned raw data", "[checkpoint]") {
  // Read back with a JSON parser and plain byte arithmetic, independently of the loader.
  const TensorMap tensors{{"w", random_of({2, 3}, kFloat32)},
                          {"b", random_of({3}, kBFloat16)},
                          {"idx", random_of({4}, kInt64)},
                          {"mask", random_of({5}, kBool)},
                          {"h", random_of({}, kFloat16)}};
  const std::string bytes = serialize_safetensors(tensors, {{"k", "v"}});
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  REQUIRE(n % 8 == 0);  // the data section starts 8-byte aligned
  REQUIRE(8 + n <= bytes.size());
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  REQUIRE(header.at("__metadata__") == nlohmann::json{{"k", "v"}});
  const std::map<std::string, std::string> names{{"w", "F32"}, {"b", "BF16"}, {"idx", "I64"}, {"mask", "BOOL"}, {"h", "F16"}};
  const std::string data = bytes.substr(8 + n);
  uint64_t covered = 0;
  for (const auto& [key, t] : tensors) {
    INFO(key);
    const auto& e = header.at(key);
    REQUIRE(e.at("dtype") == names.at(key));
    REQUIRE(e.at("shape").get<std::vector<int64_t>>() == t.sizes());
    const auto off = e.at("data_offsets").get<std::vector<uint64_t>>();
    REQUIRE(off.size() == 2);
    REQUIRE(off[1] - off[0] == t.nbytes());
    REQUIRE(data.substr(off[0], off[1] - off[0]) == raw_bytes(t));
    covered += off[1] - off[0];
  }
  REQUIRE(covered == data.size());
  REQUIRE(header.size() == tensors.size() + 1);
}

TEST_CASE("save_safetensors rejects undefined tensors, the reserved name and non-UTF-8 names", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  require_throws_with<ValueError>([&] { save_safetensors(path, {{"a", Tensor()}}); }, {"save_safetensors", "'a'", "undefined"});
  require_throws_with<ValueError>([&] { save_safetensors(path, {{"__metadata__", zeros({1})}}); },
                                  {"save_safetensors", "__metadata__"});
  require_throws_with<ValueError>([&] { save_safetensors(path, {{"bad\xff", zeros({1})}}); }, {"save_safetensors", "UTF-8"});
  require_throws_with<ValueError>([&] { save_safetensors(path, {{"a", zeros({1})}}, {{"k", "\xc3"}}); },
                                  {"save_safetensors", "UTF-8"});
  REQUIRE(dir.names().empty());
}

// ---- corrupt files ---------------------------------------------------------------------------------

namespace {

const std::string kF32x2 = std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f

// Writes bytes to a file, loads it, and requires a SerializationError naming the file and
// every one of parts.
void require_rejected(const std::string& bytes, const std::vector<std::string>& parts) {
  TempDir dir;
  const std::string path = dir.file("corrupt.safetensors");
  write_bytes(path, bytes);
  std::vector<std::string> all{path};
  all.insert(all.end(), parts.begin(), parts.end());
  require_throws_with<SerializationError>([&] { load_safetensors(path); }, all);
  // The in-memory parser names the name it is given.
  require_throws_with<SerializationError>([&] { parse_safetensors(bytes, "buffer-name"); }, {"buffer-name"});
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

}  // namespace

TEST_CASE("a well-formed hand-made file loads (the baseline of the corrupt-file cases)", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ok.safetensors");
  write_bytes(path, make_file("{" + entry("w", "F32", "[2]", "[0,8]") + ",\"__metadata__\":{\"a\":\"b\"}}", kF32x2));
  SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.at("w").to_vector<double>() == std::vector<double>{1.0, 2.0});
  REQUIRE(f.metadata == Metadata{{"a", "b"}});
}

TEST_CASE("corrupt safetensors: file and header lengths", "[checkpoint]") {
  SECTION("shorter than 8 bytes") { require_rejected("abc", {"3 bytes", "too short"}); }
  SECTION("empty file") { require_rejected("", {"0 bytes", "too short"}); }
  SECTION("header length larger than the file") {
    require_rejected(make_file("{}", "", 1000), {"header length 1000", "exceeds"});
  }
  SECTION("header length over the limit") {
    require_rejected(make_file("{}", "", uint64_t(1) << 40), {"header length 1099511627776", "limit"});
    require_rejected(make_file("{}", "", ~uint64_t(0)), {"limit"});
  }
}

TEST_CASE("corrupt safetensors: the header's JSON", "[checkpoint]") {
  SECTION("not JSON") { require_rejected(make_file("{\"w\": ", kF32x2), {"not valid JSON"}); }
  SECTION("empty header") { require_rejected(make_file("", ""), {"not valid JSON"}); }
  SECTION("not valid UTF-8") { require_rejected(make_file("{\"\xff\":1}", ""), {"not valid JSON"}); }
  SECTION("not an object") { require_rejected(make_file("[1, 2]", ""), {"not a JSON object"}); }
  SECTION("an entry that is not an object") {
    require_rejected(make_file("{\"w\": 3}", ""), {"'w'", "not a JSON object"});
  }
}

TEST_CASE("corrupt safetensors: a key given twice (the last would silently win)", "[checkpoint]") {
  const std::string kF64x1 = std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);  // 1.0
  SECTION("a tensor, the second time with another dtype and shape") {
    // Either entry alone would tile the data: [0, 8] as two F32 or one F64.
    require_rejected(make_file("{" + entry("w", "F32", "[2]", "[0,8]") + "," + entry("w", "F64", "[1]", "[0,8]") + "}",
                               kF32x2),
                     {"the key 'w' appears twice in the header"});
    require_rejected(make_file("{" + entry("w", "F64", "[1]", "[0,8]") + "," + entry("w", "F64", "[1]", "[0,8]") + "}",
                               kF64x1),
                     {"'w' appears twice"});
  }
  SECTION("a field of an entry") {
    require_rejected(make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"dtype\":\"I32\",\"data_offsets\":[0,8]}}",
                               kF32x2),
                     {"the key 'dtype' appears twice in the header (inside 'w')"});
  }
  SECTION("a metadata key, and __metadata__ itself") {
    require_rejected(make_file("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", ""),
                     {"the key 'a' appears twice in the header (inside '__metadata__')"});
    require_rejected(make_file("{\"__metadata__\":{\"a\":\"1\"},\"__metadata__\":{\"a\":\"2\"}}", ""),
                     {"the key '__metadata__' appears twice"});
  }
  SECTION("the same name in different objects is fine") {
    const SafetensorsFile f = parse_safetensors(
        make_file("{" + entry("a", "F32", "[2]", "[0,8]") + ",\"__metadata__\":{\"a\":\"dtype\",\"dtype\":\"x\"}}", kF32x2));
    REQUIRE(f.tensors.count("a") == 1);
    REQUIRE(f.metadata == Metadata{{"a", "dtype"}, {"dtype", "x"}});
  }
}

TEST_CASE("corrupt safetensors: tensor entries", "[checkpoint]") {
  SECTION("missing dtype") {
    require_rejected(make_file("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", kF32x2), {"'w'", "'dtype'"});
  }
  SECTION("missing shape") {
    require_rejected(make_file("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", kF32x2), {"'w'", "'shape'"});
  }
  SECTION("missing data_offsets") {
    require_rejected(make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", kF32x2), {"'w'", "'data_offsets'"});
  }
  SECTION("unknown dtype name") {
    require_rejected(make_file("{" + entry("w", "F8_E4M3", "[2]", "[0,2]") + "}", "ab"), {"'w'", "'F8_E4M3'"});
  }
  SECTION("dtype not a string") {
    require_rejected(make_file("{\"w\":{\"dtype\":1,\"shape\":[2],\"data_offsets\":[0,8]}}", kF32x2),
                     {"'w'", "dtype is not a string"});
  }
  SECTION("negative shape") {
    require_rejected(make_file("{" + entry("w", "F32", "[-2]", "[0,8]") + "}", kF32x2), {"'w'", "negative"});
  }
  SECTION("non-integer shape") {
    require_rejected(make_file("{" + entry("w", "F32", "[2.0]", "[0,8]") + "}", kF32x2), {"'w'", "non-integer"});
    require_rejected(make_file("{" + entry("w", "F32", "[\"2\"]", "[0,8]") + "}", kF32x2), {"'w'", "non-integer"});
  }
  SECTION("shape not an array") {
    require_rejected(make_file("{" + entry("w", "F32", "2", "[0,8]") + "}", kF32x2), {"'w'", "not an array"});
  }
  SECTION("shape so large that its byte count would overflow") {
    // 2^61 float64s are 2^64 bytes: 0 after wrapping around, which would match [0, 0].
    require_rejected(make_file("{" + entry("w", "F64", "[2305843009213693952]", "[0,0]") + "}", ""),
                     {"'w'", "too large"});
    // Empty, but with strides that would overflow int64.
    require_rejected(make_file("{" + entry("w", "F32", "[0,4294967296,4294967296]", "[0,0]") + "}", ""),
                     {"'w'", "too large"});
  }
  SECTION("data_offsets not two non-negative integers") {
    require_rejected(make_file("{" + entry("w", "F32", "[2]", "[0,8,8]") + "}", kF32x2), {"'w'", "data_offsets"});
    require_rejected(make_file("{" + entry("w", "F32", "[2]", "[-8,0]") + "}", kF32x2), {"'w'", "data_offsets"});
  }
  SECTION("data_offsets reversed") {
    require_rejected(make_file("{" + entry("w", "F32", "[2]", "[8,0]") + "}", kF32x2), {"'w'", "[8, 0]", "reversed"});
  }
  SECTION("shape times dtype size differs from the offsets' span") {
    require_rejected(make_file("{" + entry("w", "F32", "[3]", "[0,8]") + "}", kF32x2),
                     {"'w'", "(3,)", "F32", "needs 12 bytes", "span 8"});
  }
}

TEST_CASE("corrupt safetensors: the data section", "[checkpoint]") {
  SECTION("offsets past the end (truncated data)") {
    require_rejected(make_file("{" + entry("w", "F32", "[2]", "[0,8]") + "}", kF32x2.substr(0, 5)),
                     {"truncated", "'w'", "ends at byte 8", "5 bytes"});
  }
  SECTION("overlapping offsets") {
    require_rejected(make_file("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}",
                               kF32x2 + kF32x2.substr(0, 4)),
                     {"'b'", "'a'", "overlapping"});
  }
  SECTION("a gap between tensors") {
    require_rejected(make_file("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[1]", "[12,16]") + "}",
                               kF32x2 + kF32x2),
                     {"'b'", "starts at byte 12", "'a'", "gap"});
  }
  SECTION("a gap before the first tensor") {
    require_rejected(make_file("{" + entry("a", "F32", "[1]", "[4,8]") + "}", kF32x2), {"'a'", "starts at byte 4", "gap"});
  }
  SECTION("trailing bytes") {
    require_rejected(make_file("{" + entry("w", "F32", "[2]", "[0,8]") + "}", kF32x2 + "xyz"),
                     {"data section has 11 bytes", "cover 8"});
  }
  SECTION("bool bytes other than 0 and 1") {
    require_rejected(make_file("{" + entry("m", "BOOL", "[3]", "[0,3]") + "}", std::string("\x01\x00\x02", 3)),
                     {"'m'", "bool"});
  }
}

TEST_CASE("corrupt safetensors: __metadata__ must map strings to strings", "[checkpoint]") {
  const std::string w = entry("w", "F32", "[2]", "[0,8]");
  SECTION("not an object") {
    require_rejected(make_file("{" + w + ",\"__metadata__\":[\"a\"]}", kF32x2), {"__metadata__", "not a JSON object"});
  }
  SECTION("a value that is not a string") {
    require_rejected(make_file("{" + w + ",\"__metadata__\":{\"ok\":\"x\",\"epoch\":3}}", kF32x2),
                     {"__metadata__", "'epoch'", "not a string"});
  }
}

TEST_CASE("load_safetensors names the path of a missing or unreadable file", "[checkpoint]") {
  TempDir dir;
  require_throws_with<SerializationError>([&] { load_safetensors(dir.file("missing.safetensors")); },
                                          {dir.file("missing.safetensors"), "cannot open"});
  require_throws_with<SerializationError>([&] { load_safetensors(dir.path.string()); },
                                          {dir.path.string(), "is a directory, not a regular file"});
}

TEST_CASE("load_safetensors, load_checkpoint and load_weights refuse a FIFO without blocking", "[checkpoint]") {
  TempDir dir;
  const std::string fifo = make_fifo(dir.file("ckpt.safetensors"));
  require_throws_without_blocking<SerializationError>([&] { load_safetensors(fifo); }, fifo,
                                                      {fifo, "is a FIFO, not a regular file"});
  auto model = std::make_shared<nn::LinearImpl>(2, 3);
  require_throws_without_blocking<SerializationError>([&] { optim::load_checkpoint(fifo, {model.get()}); }, fifo,
                                                      {fifo, "is a FIFO"});
  require_throws_without_blocking<SerializationError>([&] { optim::load_weights(fifo, *model); }, fifo,
                                                      {fifo, "is a FIFO"});
  // A device is refused before it is opened.
  require_throws_with<SerializationError>([&] { load_safetensors("/dev/zero"); },
                                          {"/dev/zero", "is a character device, not a regular file"});
}

// ---- atomic saves --------------------------------------------------------------------------------

namespace {

// Limits the size of files this process may write (writes past it fail with EFBIG instead
// of raising SIGXFSZ) until destroyed.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    old_handler = signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old;
    lim.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
  }
};

}  // namespace

TEST_CASE("a save that fails part-way leaves the previous file intact and no temporary behind", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, {{"w", random_of({4}, kFloat32)}}, {{"version", "1"}});
  const std::string before = read_bytes(path);
  const TensorMap big{{"w", random_of({64, 256}, kFloat32)}};  // 64 KiB

  SECTION("the write fails after some bytes (file size limit)") {
    {
      FileSizeLimit limit(4096);
      require_throws_with<SerializationError>([&] { save_safetensors(path, big); }, {path, "writing", "failed after"});
    }
  }
  SECTION("serialization fails (an undefined tensor)") {
    require_throws_with<ValueError>([&] { save_safetensors(path, {{"w", zeros({2})}, {"x", Tensor()}}); }, {"'x'"});
  }
  SECTION("the target folder does not exist") {
    const std::string elsewhere = dir.file("no/such/dir/model.safetensors");
    require_throws_with<SerializationError>([&] { save_safetensors(elsewhere, big); }, {elsewhere, "temporary"});
  }
  REQUIRE(read_bytes(path) == before);
  REQUIRE(dir.names() == std::vector<std::string>{"model.safetensors"});
  // The successful save afterwards replaces it.
  save_safetensors(path, big);
  require_same_tensor(load_safetensors(path).tensors.at("w"), big.at("w"), "w");
  REQUIRE(dir.names() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("a save whose rename fails (the target is a non-empty folder) removes its temporary", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt");
  fs::create_directory(path);
  write_bytes(path + "/keep", "precious");
  require_throws_with<SerializationError>([&] { save_safetensors(path, {{"w", zeros({3})}}); }, {path, "renaming"});
  REQUIRE(dir.names() == std::vector<std::string>{"ckpt"});
  REQUIRE(read_bytes(path + "/keep") == "precious");
}

TEST_CASE("a save removes the temporaries of killed saves to the same path, and nothing else", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  // A pid that is certainly dead: a child that has exited and been reaped.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  const std::string dead = std::to_string(child);
  const std::string tmp = "model.safetensors.tmp.";
  const std::vector<std::string> stale{tmp + dead + ".0", tmp + dead + ".17"};
  std::vector<std::string> kept{
      tmp + std::to_string(getpid()) + ".3",   // this process's (another thread may be saving)
      tmp + std::to_string(getppid()) + ".0",  // a live process's
      tmp + dead,                              // not exactly path.tmp.<pid>.<n>
      tmp + dead + ".1.bak",
      tmp + dead + ".x",
      tmp + "-" + dead + ".0",
      tmp + "+" + dead + ".0",
      tmp + dead + ".",
      "other.safetensors.tmp." + dead + ".0",  // another file's
      "model.safetensors"};
  for (const std::string& name : stale) write_bytes(dir.file(name), "partial");
  for (const std::string& name : kept)
    if (name != "model.safetensors") write_bytes(dir.file(name), "keep");
  // Not regular files: a folder and a link named like a stale temporary.
  fs::create_directory(dir.file(tmp + dead + ".5"));
  fs::create_symlink(dir.file("other.safetensors.tmp." + dead + ".0"), dir.file(tmp + dead + ".6"));
  kept.push_back(tmp + dead + ".5");
  kept.push_back(tmp + dead + ".6");

  save_safetensors(path, {{"w", zeros({2})}});
  std::sort(kept.begin(), kept.end());
  REQUIRE(dir.names() == kept);
  for (const std::string& name : kept)
    if (fs::is_regular_file(fs::symlink_status(dir.file(name))) && name != "model.safetensors")
      REQUIRE(read_bytes(dir.file(name)) == "keep");
}

// ---- training checkpoints ---------------------------------------------------------------------------

namespace {

constexpr int64_t kVocab = 11, kBatch = 3, kSeq = 5, kSteps = 8;

struct Batch {
  Tensor tokens, targets;  // (B, T) each
};

std::vector<Batch> make_data() {
  manual_seed(1234);
  std::vector<Batch> data;
  for (int64_t s = 0; s < kSteps; ++s)
    data.push_back({randint(0, kVocab, {kBatch, kSeq}), randint(0, kVocab, {kBatch, kSeq})});
  return data;
}

// A model, its Adam optimizer and a StepLR schedule, made from `seed`. Every random draw
// of training is a dropout mask (after the embedding and between the LSTM layers), so a
// resume must restore the generator.
struct Trainer {
  explicit Trainer(uint64_t seed, int64_t hidden = 8)
      : model((manual_seed(seed), std::make_shared<TinyLM>(TinyLMOptions{kVocab, 6, hidden, false, 0.3, 0.25}))),
        opt(model->parameters(), optim::AdamOptions(2e-2)),
        sched(opt, /*step_size=*/3, /*gamma=*/0.5) {}
  void train(const std::vector<Batch>& data, int64_t from, int64_t to) {
    for (int64_t s = from; s < to; ++s) {
      opt.zero_grad();
      Tensor logits = model->forward(data[size_t(s)].tokens);  // (B, T, V)
      nn::functional::cross_entropy(logits.reshape({-1, kVocab}), data[size_t(s)].targets.reshape({-1})).backward();
      opt.step();
      sched.step();
    }
  }
  optim::Checkpoint checkpoint(int64_t step = 0, int64_t epoch = 0) { return {model.get(), &opt, &sched, step, epoch}; }
  std::shared_ptr<TinyLM> model;
  optim::Adam opt;
  optim::StepLR sched;
};

void require_same_state(const Trainer& a, const Trainer& b) {
  for (const auto& [key, t] : a.model->state_dict()) require_same_tensor(b.model->state_dict().at(key), t, "model " + key);
  const optim::StateDict sa = a.opt.state_dict(), sb = b.opt.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (const auto& [key, t] : sa) require_same_tensor(sb.at(key), t, "optimizer " + key);
  REQUIRE(a.sched.last_epoch() == b.sched.last_epoch());
}

bool same_parameters(const Trainer& a, const Trainer& b) {
  for (const auto& [key, t] : a.model->state_dict())
    if (raw_bytes(b.model->state_dict().at(key)) != raw_bytes(t)) return false;
  return true;
}

}  // namespace

TEST_CASE("a training checkpoint resumes bit-identically: model, Adam, StepLR, step, epoch and RNG",
          "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::vector<Batch> data = make_data();
  const int64_t k = 4;

  Trainer uninterrupted(7);
  uninterrupted.train(data, 0, k);
  optim::save_checkpoint(path, uninterrupted.checkpoint(k, /*epoch=*/2));
  uninterrupted.train(data, k, kSteps);

  // Different initial weights and generator state, so nothing matches unless restored.
  Trainer resumed(99);
  rand({17});
  optim::TrainingState s = optim::load_checkpoint(path, resumed.checkpoint());
  REQUIRE(s.step == k);
  REQUIRE(s.epoch == 2);
  REQUIRE(resumed.opt.lr() == uninterrupted.opt.param_groups()[0].initial_lr * 0.5);  // StepLR after 4 steps
  resumed.train(data, s.step, kSteps);
  require_same_state(uninterrupted, resumed);
  REQUIRE(dir.names() == std::vector<std::string>{"ckpt.safetensors"});

  // The generator matters: the same resume with a different random stream diverges.
  Trainer reseeded(99);
  optim::load_checkpoint(path, reseeded.checkpoint());
  manual_seed(5);
  reseeded.train(data, k, kSteps);
  REQUIRE_FALSE(same_parameters(uninterrupted, reseeded));
}

TEST_CASE("a checkpoint holds the model under PyTorch's names, the optimizer, the scheduler and meta", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer t(3);
  t.train(make_data(), 0, 2);
  optim::save_checkpoint(path, t.checkpoint(2, 1));
  SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.metadata.at("format") == "loom-checkpoint");
  for (const char* key : {"model.embedding.weight", "model.lstm.weight_ih_l0", "model.lstm.weight_hh_l1",
                          "model.lstm.bias_ih_l1", "model.fc.weight", "model.fc.bias", "optimizer.state.0.exp_avg",
                          "optimizer.param_groups.0.lr", "scheduler.last_epoch", "meta.step", "meta.epoch",
                          "meta.rng_seed", "meta.rng_offset"}) {
    INFO(key);
    CHECK(f.tensors.count(key) == 1);
  }
  REQUIRE(f.tensors.at("meta.step").item<int64_t>() == 2);
  REQUIRE(f.tensors.at("scheduler.last_epoch").item<int64_t>() == 2);
}

TEST_CASE("load_checkpoint errors: a model of another shape, a weights file, a corrupt file", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer t(3);
  optim::save_checkpoint(path, t.checkpoint(0, 0));

  SECTION("a model of another shape: ValueError listing the keys") {
    Trainer wider(3, /*hidden=*/10);
    require_throws_with<ValueError>([&] { optim::load_checkpoint(path, wider.checkpoint()); },
                                    {"load_state_dict", "shape mismatches", "lstm.weight_hh_l0", "(32, 8)", "(40, 10)",
                                     "fc.weight"});
  }
  SECTION("a model with other layers: missing and unexpected keys") {
    auto other = std::make_shared<nn::LinearImpl>(2, 3);
    require_throws_with<ValueError>([&] { optim::load_checkpoint(path, {other.get()}); },
                                    {"missing keys", "weight", "bias", "unexpected keys", "embedding.weight"});
  }
  SECTION("a weights file is not a checkpoint") {
    const std::string weights = dir.file("weights.safetensors");
    optim::save_weights(weights, *t.model);
    require_throws_with<SerializationError>([&] { optim::load_checkpoint(weights, t.checkpoint()); },
                                            {weights, "not a Loom training checkpoint"});
  }
  SECTION("a checkpoint without its step: nothing is loaded") {
    SafetensorsFile f = load_safetensors(path);
    f.tensors.erase("meta.step");
    const std::string stepless = dir.file("stepless.safetensors");
    save_safetensors(stepless, f.tensors, f.metadata);
    Trainer other(5);
    const std::string before = raw_bytes(other.model->fc->weight.detach());
    require_throws_with<SerializationError>([&] { optim::load_checkpoint(stepless, other.checkpoint()); },
                                            {stepless, "meta.step"});
    REQUIRE(raw_bytes(other.model->fc->weight.detach()) == before);
  }
  SECTION("a corrupt file") {
    const std::string bad = dir.file("bad.safetensors");
    write_bytes(bad, read_bytes(path).substr(0, 100));
    require_throws_with<SerializationError>([&] { optim::load_checkpoint(bad, t.checkpoint()); }, {bad});
  }
  SECTION("no model") {
    require_throws_with<ValueError>([&] { optim::load_checkpoint(path, {}); }, {"load_checkpoint", "no model"});
    require_throws_with<ValueError>([&] { optim::save_checkpoint(path, {}); }, {"save_checkpoint", "no model"});
  }
}

namespace {

// Everything a restore may change, bit for bit: the model, the optimizer's state and lrs,
// the scheduler and the generator.
struct Snapshot {
  std::map<std::string, std::string> tensors;
  int64_t last_epoch;
  uint64_t seed, offset;
  explicit Snapshot(const Trainer& t)
      : last_epoch(t.sched.last_epoch()), seed(default_generator().seed()), offset(default_generator().offset()) {
    for (const auto& [key, v] : t.model->state_dict()) tensors["model." + key] = raw_bytes(v);
    for (const auto& [key, v] : t.opt.state_dict()) tensors["optimizer." + key] = raw_bytes(v);
  }
  bool operator==(const Snapshot&) const = default;
};

}  // namespace

TEST_CASE("load_checkpoint is all or nothing: a bad entry anywhere changes nothing", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::vector<Batch> data = make_data();
  Trainer saved(3);
  saved.train(data, 0, 4);
  optim::save_checkpoint(path, saved.checkpoint(4, 1));
  const SafetensorsFile good = load_safetensors(path);

  struct Case {
    std::string what, key;
    Tensor value;  // undefined: remove the key
    std::string why;
  };
  const Tensor p0 = good.tensors.at("optimizer.state.0.exp_avg_sq");
  const std::vector<Case> cases{
      {"a NaN lr", "optimizer.param_groups.0.lr", scalar_tensor(NAN, kFloat64), "non-negative learning rate"},
      {"a negative lr", "optimizer.param_groups.0.lr", scalar_tensor(-0.1, kFloat64), "got -0.1"},
      {"an empty lr", "optimizer.param_groups.0.lr", zeros({0}, kFloat64), "must be one number"},
      {"a negative initial_lr", "optimizer.param_groups.0.initial_lr", scalar_tensor(-1.0, kFloat64), "learning rate"},
      {"a negative step", "optimizer.step", scalar_tensor(int64_t(-3), kInt64), "non-negative count, got -3"},
      {"a non-integral per-parameter step", "optimizer.state.0.step", scalar_tensor(2.5, kFloat32), "whole count"},
      {"a negative per-parameter step", "optimizer.state.1.step", scalar_tensor(int64_t(-1), kInt64), "got -1"},
      // Counts that the next step() would overflow (found by tests/fuzz/fuzz_checkpoint.cpp).
      {"a per-parameter step of INT64_MAX", "optimizer.state.0.step", scalar_tensor(INT64_MAX, kInt64), "at most 2^62"},
      {"a step of INT64_MAX", "optimizer.step", scalar_tensor(INT64_MAX, kInt64), "at most 2^62"},
      {"a float step past 2^62", "optimizer.state.1.step", scalar_tensor(9e18, kFloat32), "at most 2^62"},
      {"a scheduler epoch of INT64_MAX", "scheduler.last_epoch", scalar_tensor(INT64_MAX, kInt64), "at most 2^62"},
      {"a negative exp_avg_sq", "optimizer.state.0.exp_avg_sq", p0 - 1e6, "negative or NaN"},
      {"a NaN exp_avg_sq", "optimizer.state.2.exp_avg_sq",
       good.tensors.at("optimizer.state.2.exp_avg_sq") * NAN, "negative or NaN"},
      {"an integer buffer", "optimizer.state.0.exp_avg", zeros(p0.sizes(), kInt64), "floating-point buffer"},
      {"a mis-shaped buffer", "optimizer.state.0.exp_avg", zeros({1, 2}), "has shape (1, 2)"},
      {"a buffer Adam does not keep", "optimizer.state.0.momentum_buffer", zeros(p0.sizes()), "unexpected keys"},
      {"a parameter the optimizer does not have", "optimizer.state.99.exp_avg", zeros({2}), "names parameter 99"},
      {"a malformed state key", "optimizer.state.01.exp_avg", zeros(p0.sizes()), "unexpected keys"},
      {"a missing lr", "optimizer.param_groups.0.lr", Tensor(), "missing key 'param_groups.0.lr'"},
      {"a negative scheduler epoch", "scheduler.last_epoch", scalar_tensor(int64_t(-2), kInt64), "non-negative"},
      {"an unexpected scheduler key", "scheduler.best", scalar_tensor(1.0, kFloat64), "unexpected keys"},
      {"a non-scalar meta.step", "meta.step", zeros({1}, kInt64), "not an int64 scalar"},
      {"a float meta.rng_offset", "meta.rng_offset", scalar_tensor(1.0, kFloat64), "not an int64 scalar"},
      {"an unknown entry", "other.thing", zeros({1}), "unexpected entry 'other.thing'"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    TensorMap tensors = good.tensors;
    if (c.value.defined()) tensors[c.key] = c.value;
    else tensors.erase(c.key);
    const std::string bad = dir.file("bad.safetensors");
    save_safetensors(bad, tensors, good.metadata);

    // A restore target with its own trained state, different from the file's.
    Trainer target(5);
    target.train(data, 0, 2);
    manual_seed(77);
    const Snapshot before(target);
    const std::string key_in_message = c.key.substr(c.key.find('.') + 1);
    require_throws_with<SerializationError>([&] { optim::load_checkpoint(bad, target.checkpoint()); },
                                            {"load_checkpoint", bad, c.key.starts_with("extra") ? c.key : key_in_message,
                                             c.why});
    REQUIRE(Snapshot(target) == before);
  }
  // A model that does not fit (ValueError) changes nothing either, the optimizer included.
  TensorMap tensors = good.tensors;
  tensors["model.fc.bias"] = zeros({kVocab + 1});
  const std::string misfit = dir.file("misfit.safetensors");
  save_safetensors(misfit, tensors, good.metadata);
  Trainer target(5);
  target.train(data, 0, 2);
  const Snapshot before(target);
  require_throws_with<ValueError>([&] { optim::load_checkpoint(misfit, target.checkpoint()); }, {"fc.bias"});
  REQUIRE(Snapshot(target) == before);
  // And the good file loads into the same target.
  optim::load_checkpoint(path, target.checkpoint());
  require_same_state(saved, target);
}

TEST_CASE("Optimizer::load_state_dict checks values as the constructor does and changes nothing on error",
          "[checkpoint][optim]") {
  manual_seed(1);
  Tensor w = randn({3}).requires_grad_(true);
  optim::Adam opt({w}, optim::AdamOptions(0.1));
  (w * w).sum().backward();
  opt.step();
  const optim::StateDict good = opt.state_dict();
  auto with = [&](const std::string& key, const Tensor& v) {
    optim::StateDict s = good;
    s[key] = v;
    return s;
  };
  const std::string before = raw_bytes(opt.state_dict().at("state.0.exp_avg_sq"));
  require_throws_with<ValueError>([&] { opt.load_state_dict(with("param_groups.0.lr", scalar_tensor(NAN, kFloat64))); },
                                  {"Adam.load_state_dict", "'param_groups.0.lr'", "learning rate, got nan"});
  require_throws_with<ValueError>(
      [&] { opt.load_state_dict(with("state.0.exp_avg_sq", good.at("state.0.exp_avg_sq") * -1.0 - 1.0)); },
      {"'state.0.exp_avg_sq'", "negative"});
  REQUIRE(opt.lr() == 0.1);
  REQUIRE(raw_bytes(opt.state_dict().at("state.0.exp_avg_sq")) == before);
  // PyTorch stores a parameter's step as a float; a whole one loads as the int64 count.
  opt.load_state_dict(with("state.0.step", scalar_tensor(7.0, kFloat32)));
  REQUIRE(opt.state_dict().at("state.0.step").dtype() == kInt64);
  REQUIRE(opt.state_dict().at("state.0.step").item<int64_t>() == 7);
}

TEST_CASE("save_weights / load_weights use exactly PyTorch's state_dict keys", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("weights.safetensors");
  Trainer a(11);
  optim::save_weights(path, *a.model);
  // torch: Embedding.weight; LSTM weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}; Linear weight, bias.
  std::vector<std::string> keys;
  for (const auto& [key, t] : load_safetensors(path).tensors) keys.push_back(key);
  REQUIRE(keys == std::vector<std::string>{"embedding.weight", "fc.bias", "fc.weight", "lstm.bias_hh_l0",
                                           "lstm.bias_hh_l1", "lstm.bias_ih_l0", "lstm.bias_ih_l1",
                                           "lstm.weight_hh_l0", "lstm.weight_hh_l1", "lstm.weight_ih_l0",
                                           "lstm.weight_ih_l1"});
  Trainer b(12);
  REQUIRE_FALSE(same_parameters(a, b));
  optim::load_weights(path, *b.model);
  REQUIRE(same_parameters(a, b));

  // strict: a missing key is an error; non-strict loads what is there.
  SafetensorsFile f = load_safetensors(path);
  f.tensors.erase("fc.bias");
  const std::string partial = dir.file("partial.safetensors");
  save_safetensors(partial, f.tensors);
  Trainer c(13);
  require_throws_with<ValueError>([&] { optim::load_weights(partial, *c.model); }, {"missing keys: fc.bias"});
  optim::load_weights(partial, *c.model, /*strict=*/false);
  require_same_tensor(c.model->fc->weight.detach(), a.model->fc->weight.detach(), "fc.weight");
}
