// TensorBoard event files (train/tensorboard/summary_writer.h): CRC-32C on both paths against the
// standard check value and a bit-at-a-time reference, the masked CRC, varints and protobuf
// fields byte for byte, and event files parsed back by an independent reader here (its own
// CRC, TFRecord framing and protobuf decoding): records, tags, steps, values, text,
// histograms (buckets against a plain loop), buffering and flushing, a truncated file,
// the file names and the typed errors. tests/tensorboard/read_events.py reads the same
// kind of files with TensorBoard's own EventAccumulator.
#include "catch2_compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "core/factories.h"
#include "core/tensor.h"
#include "fake_clock.h"
#include "test_util.h"
#include "train/metrics/metrics_log.h"
#include "train/tensorboard/crc32c.h"
#include "train/tensorboard/event_file.h"
#include "train/tensorboard/histogram.h"
#include "train/tensorboard/protobuf_writer.h"
#include "train/tensorboard/summary_writer.h"

using namespace loom;
using namespace loom::train;
using loom::test::require_throws_with;
using loom::test::FakeClock;
using loom::test::TempDir;
namespace fs = std::filesystem;

namespace {

// ---- an independent reader -------------------------------------------------------------

// CRC-32C one bit at a time, straight from the definition (reflected polynomial 0x82F63B78).
uint32_t reference_crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

uint32_t reference_masked(std::string_view bytes) {
  const uint32_t c = reference_crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

uint64_t little_endian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes.size(); ++i) v |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

struct TFRecords {
  std::vector<std::string> records;  // the complete, CRC-checked ones
  size_t trailing_bytes = 0;         // of a record cut short at the end
};

// Reads records until the end or a cut-short one; a bad CRC fails the test.
TFRecords read_tfrecords(const std::string& bytes) {
  TFRecords out;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) break;
    const std::string_view header(bytes.data() + at, 8);
    REQUIRE(little_endian(std::string_view(bytes.data() + at + 8, 4)) == reference_masked(header));
    const uint64_t length = little_endian(header);
    if (bytes.size() - at - 12 < length + 4) break;
    const std::string_view data(bytes.data() + at + 12, length);
    REQUIRE(little_endian(std::string_view(bytes.data() + at + 12 + length, 4)) == reference_masked(data));
    out.records.emplace_back(data);
    at += 16 + length;
  }
  out.trailing_bytes = bytes.size() - at;
  return out;
}

// A protobuf message decoded without its schema: each field's number, wire type and raw
// value (the varint, the 4 or 8 bytes, or the length-delimited bytes).
struct Field {
  int number = 0, wire = 0;
  uint64_t varint = 0;
  std::string bytes;
  double as_double() const { return std::bit_cast<double>(little_endian(bytes)); }
  float as_float() const { return std::bit_cast<float>(static_cast<uint32_t>(little_endian(bytes))); }
};

uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    REQUIRE(at < s.size());
    const auto b = static_cast<unsigned char>(s[at++]);
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  FAIL("varint longer than 10 bytes");
  return v;
}

std::vector<Field> decode(const std::string& s) {
  std::vector<Field> fields;
  size_t at = 0;
  while (at < s.size()) {
    const uint64_t key = read_varint(s, at);
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    size_t n = 0;
    switch (f.wire) {
      case 0: f.varint = read_varint(s, at); break;
      case 1: n = 8; break;
      case 5: n = 4; break;
      case 2: n = static_cast<size_t>(read_varint(s, at)); break;
      default: FAIL("unexpected wire type " << f.wire);
    }
    REQUIRE(at + n <= s.size());
    f.bytes = s.substr(at, n);
    at += n;
    fields.push_back(std::move(f));
  }
  return fields;
}

std::vector<Field> all(const std::string& message, int number) {
  std::vector<Field> out;
  for (Field& f : decode(message)) {
    if (f.number == number) out.push_back(std::move(f));
  }
  return out;
}

Field one(const std::string& message, int number) {
  std::vector<Field> fs_ = all(message, number);
  REQUIRE(fs_.size() == 1);
  return fs_[0];
}

bool has(const std::string& message, int number) { return !all(message, number).empty(); }

std::vector<double> packed_doubles(const Field& f) {
  REQUIRE(f.wire == 2);
  REQUIRE(f.bytes.size() % 8 == 0);
  std::vector<double> out;
  for (size_t i = 0; i < f.bytes.size(); i += 8) out.push_back(std::bit_cast<double>(little_endian(f.bytes.substr(i, 8))));
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One Event as the test sees it (event.proto: wall_time 1, step 2, file_version 3, summary 5).
struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::string tag;      // of the Summary's single Value
  std::string value;    // that Value, encoded
};

Event parse_event(const std::string& record) {
  Event e;
  e.wall_time = one(record, 1).as_double();
  if (has(record, 2)) e.step = static_cast<int64_t>(one(record, 2).varint);
  if (has(record, 3)) e.file_version = one(record, 3).bytes;
  if (has(record, 5)) {
    e.value = one(one(record, 5).bytes, 1).bytes;  // Summary.value
    e.tag = one(e.value, 1).bytes;
  }
  return e;
}

std::vector<Event> read_events(const std::string& path) {
  std::vector<Event> out;
  for (const std::string& r : read_tfrecords(read_file(path)).records) out.push_back(parse_event(r));
  return out;
}

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string varint_bytes(uint64_t v) {
  std::string s;
  append_varint(s, v);
  return s;
}


}  // namespace

// ---- CRC-32C ---------------------------------------------------------------------------

TEST_CASE("summary writer: crc32c check value on the portable and the hardware path", "[train][tensorboard]") {
  CHECK(crc32c_portable("123456789") == 0xE3069283u);
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c_portable("") == 0u);
  CHECK(reference_crc32c("123456789") == 0xE3069283u);  // the test's own reference agrees
  if (crc32c_hardware_available()) {
    CHECK(crc32c_hardware("123456789") == 0xE3069283u);
  } else {
    WARN("no SSE4.2 on this CPU: only the portable CRC-32C was checked");
  }
}

TEST_CASE("summary writer: crc32c paths agree with the bitwise reference at every length and alignment", "[train][tensorboard]") {
  std::mt19937 rng(7);
  std::string buf(300, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n = 0; n + offset <= buf.size(); n += (n < 40 ? 1 : 37)) {
      const std::string_view piece(buf.data() + offset, n);
      const uint32_t want = reference_crc32c(piece);
      REQUIRE(crc32c_portable(piece) == want);
      if (crc32c_hardware_available()) REQUIRE(crc32c_hardware(piece) == want);
      // In two pieces: the second continues from the first's CRC.
      const size_t cut = n / 3;
      REQUIRE(crc32c_portable(piece.substr(cut), crc32c_portable(piece.substr(0, cut))) == want);
      REQUIRE(crc32c(piece.substr(cut), crc32c(piece.substr(0, cut))) == want);
    }
  }
}

TEST_CASE("summary writer: masked crc32c matches TFRecord's values", "[train][tensorboard]") {
  // Values from TensorBoard's masked_crc32c (tensorboard.compat.tensorflow_stub).
  CHECK(mask_crc32c(crc32c("123456789")) == 0xC78AB0E5u);
  CHECK(mask_crc32c(crc32c("")) == 0xA282EAD8u);
  CHECK(mask_crc32c(crc32c(std::string(8, '\0'))) == 0x07980329u);  // the header of an empty record
  const std::string ten("\x0a\0\0\0\0\0\0\0", 8);
  CHECK(mask_crc32c(crc32c(ten)) == 0x3ABFA3AEu);
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u}) CHECK(unmask_crc32c(mask_crc32c(c)) == c);
}

// ---- protobuf encoding -------------------------------------------------------------------

TEST_CASE("summary writer: varints byte for byte", "[train][tensorboard]") {
  CHECK(hex(varint_bytes(0)) == "00");
  CHECK(hex(varint_bytes(1)) == "01");
  CHECK(hex(varint_bytes(127)) == "7f");
  CHECK(hex(varint_bytes(128)) == "80 01");
  CHECK(hex(varint_bytes(300)) == "ac 02");
  CHECK(hex(varint_bytes(16384)) == "80 80 01");
  CHECK(hex(varint_bytes(std::numeric_limits<uint64_t>::max())) == "ff ff ff ff ff ff ff ff ff 01");
  // A negative int64 (a step of -1) is its 64-bit two's complement: ten bytes, as protobuf.
  CHECK(hex(varint_bytes(static_cast<uint64_t>(int64_t{-1}))) == "ff ff ff ff ff ff ff ff ff 01");
  for (uint64_t v : {uint64_t{0}, uint64_t{5}, uint64_t{1} << 35, uint64_t{123456789012345}}) {
    const std::string s = varint_bytes(v);
    size_t at = 0;
    CHECK(read_varint(s, at) == v);
    CHECK(at == s.size());
  }
}

TEST_CASE("summary writer: protobuf fields byte for byte", "[train][tensorboard]") {
  ProtoWriter w;
  w.bytes_field(1, "loss");      // key 0x0a, length 4
  w.float_field(2, 0.25f);       // key 0x15, 0x3e800000 little-endian
  w.varint_field(2, 150);        // key 0x10
  w.double_field(1, 1.0);        // key 0x09, 0x3ff0000000000000 little-endian
  CHECK(hex(w.bytes()) == "0a 04 6c 6f 73 73 15 00 00 80 3e 10 96 01 09 00 00 00 00 00 00 f0 3f");
  ProtoWriter outer;
  outer.message_field(5, w);
  CHECK(hex(outer.bytes().substr(0, 2)) == "2a 17");  // field 5, length 23
  ProtoWriter packed;
  const double two[] = {1.0, -2.0};
  packed.packed_doubles_field(6, two);
  CHECK(hex(packed.bytes()) == "32 10 00 00 00 00 00 00 f0 3f 00 00 00 00 00 00 00 c0");
  ProtoWriter big_field;
  big_field.varint_field(16, 1);  // a two-byte key
  CHECK(hex(big_field.bytes()) == "80 01 01");
}

// ---- TFRecord framing ----------------------------------------------------------------------

TEST_CASE("summary writer: TFRecord framing parsed back", "[train][tensorboard]") {
  const std::string data = "hello, event";
  const std::string framed = tfrecord_frame(data);
  REQUIRE(framed.size() == data.size() + 16);
  CHECK(little_endian(framed.substr(0, 8)) == data.size());
  CHECK(little_endian(framed.substr(8, 4)) == reference_masked(framed.substr(0, 8)));
  CHECK(framed.substr(12, data.size()) == data);
  CHECK(little_endian(framed.substr(12 + data.size())) == reference_masked(data));
  const TFRecords back = read_tfrecords(tfrecord_frame("") + framed + tfrecord_frame(std::string(1000, 'x')));
  REQUIRE(back.records.size() == 3);
  CHECK(back.records[0].empty());
  CHECK(back.records[1] == data);
  CHECK(back.records[2] == std::string(1000, 'x'));
  CHECK(back.trailing_bytes == 0);
}

// ---- event files -------------------------------------------------------------------------

TEST_CASE("summary writer: file name, first record and scalars", "[train][tensorboard]") {
  TempDir dir;
  const std::string log_dir = dir.file("run");
  const double before = unix_time_seconds();
  std::string path;
  {
    SummaryWriter tb(log_dir);
    path = tb.paths().at(0);
    CHECK(fs::exists(path));  // created, with its first record, at construction
    CHECK(read_events(path).size() == 1);
    tb.add_scalar("loss/train", 0.5, 1);
    tb.add_scalar("loss/train", 0.25, 2);
    tb.add_scalar("lr", 3e-3, 2);
    tb.add_scalar("loss/train", 1e30, -7);  // any int64 step; any double (stored as a float)
  }  // the destructor flushes and closes

  const std::string name = fs::path(path).filename().string();
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  const std::regex pattern(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+))");
  std::smatch m;
  REQUIRE(std::regex_match(name, m, pattern));
  CHECK(std::abs(std::stod(m[1].str()) - before) <= 5);
  CHECK(m[2].str() == host);
  CHECK(m[3].str() == std::to_string(getpid()));
  CHECK(fs::path(path).parent_path() == fs::path(log_dir));

  const std::vector<Event> events = read_events(path);
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].tag.empty());
  CHECK(std::abs(events[0].wall_time - before) < 60);
  struct Want {
    std::string tag;
    float value;
    int64_t step;
  };
  const std::vector<Want> want = {{"loss/train", 0.5f, 1}, {"loss/train", 0.25f, 2}, {"lr", 3e-3f, 2}, {"loss/train", 1e30f, -7}};
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("scalar " << i);
    const Event& e = events[i + 1];
    CHECK(e.tag == want[i].tag);
    CHECK(e.step == want[i].step);
    CHECK(one(e.value, 2).as_float() == want[i].value);  // simple_value
    CHECK(e.wall_time >= events[0].wall_time);
  }
}

TEST_CASE("summary writer: add_scalars writes one event file per key under main_tag_key", "[train][tensorboard]") {
  TempDir dir;
  const std::string log_dir = dir.file("run");
  SummaryWriter tb(log_dir);
  tb.add_scalars("loss/all", {{"train", 1.5}, {"test", 2.5}}, 1);
  tb.add_scalars("loss/all", {{"train", 1.0}, {"test", 2.0}}, 2);
  tb.close();
  const std::vector<std::string> paths = tb.paths();
  REQUIRE(paths.size() == 3);
  for (const auto& [key, values] : std::map<std::string, std::vector<float>>{{"train", {1.5f, 1.0f}}, {"test", {2.5f, 2.0f}}}) {
    INFO(key);
    const fs::path folder = fs::path(log_dir) / ("loss_all_" + key);
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(folder)) files.push_back(e.path());
    REQUIRE(files.size() == 1);
    CHECK(files[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
    const std::vector<Event> events = read_events(files[0].string());
    REQUIRE(events.size() == 3);
    CHECK(events[0].file_version == "brain.Event:2");
    for (size_t i = 0; i < 2; ++i) {
      CHECK(events[i + 1].tag == "loss/all");  // the main tag: the folders are the lines
      CHECK(events[i + 1].step == int64_t(i + 1));
      CHECK(one(events[i + 1].value, 2).as_float() == values[i]);
    }
  }
  CHECK(read_events(paths[0]).size() == 1);  // nothing in the writer's own file
}

TEST_CASE("summary writer: add_text is a string tensor with the text plugin's metadata", "[train][tensorboard]") {
  TempDir dir;
  SummaryWriter tb(dir.file("run"));
  const std::string text = "lr=3e-3 **hidden**=128\nüñí";
  tb.add_text("config", text, 4);
  tb.close();
  const std::vector<Event> events = read_events(tb.paths()[0]);
  REQUIRE(events.size() == 2);
  const Event& e = events[1];
  CHECK(e.tag == "config/text_summary");
  CHECK(e.step == 4);
  const std::string metadata = one(e.value, 9).bytes;
  const std::string plugin = one(metadata, 1).bytes;
  CHECK(one(plugin, 1).bytes == "text");
  const std::string tensor = one(e.value, 8).bytes;
  CHECK(one(tensor, 1).varint == 7);  // DT_STRING
  const std::string shape = one(tensor, 2).bytes;
  CHECK(one(one(shape, 2).bytes, 1).varint == 1);  // dim { size: 1 }
  CHECK(one(tensor, 8).bytes == text);
}

// ---- histograms --------------------------------------------------------------------------

namespace {

// numpy.histogram's counts by a plain scan of the bins: [e_i, e_i+1), the last closed.
std::vector<double> plain_counts(const std::vector<double>& values, const std::vector<double>& edges) {
  std::vector<double> counts(edges.size() - 1, 0.0);
  for (double v : values) {
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
      const bool last = i + 2 == edges.size();
      if (v >= edges[i] && (v < edges[i + 1] || (last && v == edges[i + 1]))) {
        counts[i] += 1;
        break;
      }
    }
  }
  return counts;
}

// The kept buckets as PyTorch's make_histogram chooses them, from the plain counts.
void check_against_plain_loop(const std::vector<double>& values) {
  const std::vector<double>& edges = default_histogram_edges();
  const std::vector<double> counts = plain_counts(values, edges);
  size_t first = 0, last = 0;
  bool any = false;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) {
      if (!any) first = i;
      last = i;
      any = true;
    }
  }
  REQUIRE(any);
  std::vector<double> want_limits, want_counts;
  if (first == 0) {
    want_limits.push_back(edges[0]);
    want_counts.push_back(0);
  }
  for (size_t i = first == 0 ? 0 : first - 1; i <= last; ++i) {
    want_limits.push_back(edges[i + 1]);
    want_counts.push_back(counts[i]);
  }
  const Histogram h = make_histogram(values);
  CHECK(h.bucket_limit == want_limits);
  CHECK(h.bucket == want_counts);
  double total = 0;
  for (double c : h.bucket) total += c;
  double inside = 0;
  for (double c : counts) inside += c;
  CHECK(total == inside);
}

}  // namespace

TEST_CASE("summary writer: TensorBoard's default histogram edges", "[train][tensorboard]") {
  const std::vector<double>& edges = default_histogram_edges();
  REQUIRE(edges.size() == 1549);  // 774 each side of 0 (1e-12 * 1.1^k below 1e20)
  CHECK(edges[774] == 0.0);
  CHECK(edges[775] == 1e-12);
  CHECK(edges[773] == -1e-12);
  CHECK(edges[776] == 1e-12 * 1.1);
  CHECK(edges.back() < 1e20);
  CHECK(edges.back() * 1.1 >= 1e20);
  CHECK(edges.front() == -edges.back());
  for (size_t i = 1; i < edges.size(); ++i) REQUIRE(edges[i - 1] < edges[i]);
}

TEST_CASE("summary writer: histogram buckets against a plain loop", "[train][tensorboard]") {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<double> values;
  for (int i = 0; i < 500; ++i) values.push_back(normal(rng));
  SECTION("normal values") { check_against_plain_loop(values); }
  SECTION("values on edges, zeros, tiny and huge ones") {
    const std::vector<double>& edges = default_histogram_edges();
    values = {0.0, -0.0, 0.0, edges[800], edges[700], edges[1], edges.front(), edges.back(), 1e-300, -1e-300, 5e19, -3.0};
    check_against_plain_loop(values);
  }
  SECTION("one value") {
    values = {1.0};
    check_against_plain_loop(values);
  }
  SECTION("outside the bins and NaN: counted in num and sum, in no bucket") {
    values = {1.0, 2.0, 1e25, -std::numeric_limits<double>::infinity()};
    check_against_plain_loop(values);
    const Histogram h = make_histogram(values);
    CHECK(h.num == 4);
    CHECK(h.min == -std::numeric_limits<double>::infinity());
    CHECK(h.max == 1e25);
    values.push_back(std::numeric_limits<double>::quiet_NaN());
    const Histogram with_nan = make_histogram(values);
    CHECK(std::isnan(with_nan.min));
    CHECK(std::isnan(with_nan.sum));
    CHECK(with_nan.bucket == h.bucket);
  }
}

TEST_CASE("summary writer: histogram statistics", "[train][tensorboard]") {
  const std::vector<double> values = {-1.5, 0.0, 2.0, 3.5, 3.5};
  const Histogram h = make_histogram(values);
  CHECK(h.min == -1.5);
  CHECK(h.max == 3.5);
  CHECK(h.num == 5);
  CHECK(h.sum == 7.5);
  CHECK(h.sum_squares == 2.25 + 4 + 12.25 + 12.25);
  double total = 0;
  for (double c : h.bucket) total += c;
  CHECK(total == 5);
  CHECK(h.bucket.front() == 0);  // the empty bin left of the first value's (its left edge)
  CHECK(h.bucket_limit.back() >= 3.5);
  require_throws_with<ValueError>([] { make_histogram(std::vector<double>{}); }, {"empty"});
  require_throws_with<ValueError>([] { make_histogram(std::vector<double>{std::nan("")}); }, {"inside the bins"});
}

TEST_CASE("summary writer: add_histogram of a tensor writes a HistogramProto", "[train][tensorboard]") {
  TempDir dir;
  SummaryWriter tb(dir.file("run"));
  std::vector<double> values;
  for (int i = 0; i < 24; ++i) values.push_back((i - 10) * 0.37);
  // A float64 tensor, viewed transposed (not contiguous): any strides must do.
  const Tensor t = from_vector(values, {4, 6}).t();
  tb.add_histogram("fc.weight", t, 3);
  require_throws_with<ValueError>([&] { tb.add_histogram("w", zeros({0}), 1); }, {"empty"});
  require_throws_with<DTypeError>([&] { tb.add_histogram("w", ones({2}, kBool), 1); }, {"Bool"});
  tb.close();

  const std::vector<Event> events = read_events(tb.paths()[0]);
  REQUIRE(events.size() == 2);
  CHECK(events[1].tag == "fc.weight");
  CHECK(events[1].step == 3);
  const std::string histo = one(events[1].value, 5).bytes;
  const Histogram want = make_histogram(t.to_vector<double>());
  CHECK(one(histo, 1).as_double() == -3.7);
  CHECK(one(histo, 2).as_double() == want.max);
  CHECK(one(histo, 3).as_double() == 24);
  CHECK(one(histo, 4).as_double() == want.sum);
  CHECK(one(histo, 5).as_double() == want.sum_squares);
  CHECK(packed_doubles(one(histo, 6)) == want.bucket_limit);
  CHECK(packed_doubles(one(histo, 7)) == want.bucket);
}

// ---- buffering, crashes, errors ----------------------------------------------------------------

TEST_CASE("summary writer: records are buffered until flush, flush_secs or a full buffer", "[train][tensorboard]") {
  TempDir dir;
  FakeClock clock;
  SummaryWriterOptions options;
  options.flush_secs = 120;
  options.clock = clock.clock();
  SummaryWriter tb(dir.file("run"), options);
  const std::string path = tb.paths()[0];
  tb.add_scalar("a", 1, 1);
  tb.add_scalar("a", 2, 2);
  CHECK(read_events(path).size() == 1);  // only the first record is on disk
  tb.flush();
  CHECK(read_events(path).size() == 3);
  tb.add_scalar("a", 3, 3);
  clock.now = 119;
  tb.add_scalar("a", 4, 4);
  CHECK(read_events(path).size() == 3);
  clock.now = 120.5;
  tb.add_scalar("a", 5, 5);  // 120 s since the last write: this one writes them all
  CHECK(read_events(path).size() == 6);

  SummaryWriterOptions small = options;
  small.max_buffer_bytes = 100;
  SummaryWriter tb2(dir.file("run2"), small);
  size_t written = 0;
  for (int i = 0; i < 20; ++i) {
    tb2.add_scalar("a", i, i);
    written = read_events(tb2.paths()[0]).size();
    CHECK(written + 4 >= size_t(i + 2));  // never more than a few ~35-byte records waiting
  }
}

TEST_CASE("summary writer: a file cut anywhere reads up to its last complete record", "[train][tensorboard]") {
  TempDir dir;
  std::string path;
  {
    SummaryWriter tb(dir.file("run"));
    for (int i = 0; i < 5; ++i) tb.add_scalar("loss", 1.0 / (i + 1), i);
    tb.add_text("note", "the end", 5);
    path = tb.paths()[0];
  }
  const std::string bytes = read_file(path);
  const TFRecords whole = read_tfrecords(bytes);
  REQUIRE(whole.records.size() == 7);
  REQUIRE(whole.trailing_bytes == 0);
  // The byte offset where each record ends.
  std::vector<size_t> ends;
  size_t at = 0;
  for (const std::string& r : whole.records) ends.push_back(at += r.size() + 16);
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    const TFRecords part = read_tfrecords(bytes.substr(0, cut));
    size_t complete = 0;
    while (complete < ends.size() && ends[complete] <= cut) ++complete;
    INFO("cut at byte " << cut);
    REQUIRE(part.records.size() == complete);
    for (size_t i = 0; i < complete; ++i) REQUIRE(part.records[i] == whole.records[i]);
    REQUIRE(part.trailing_bytes == cut - (complete ? ends[complete - 1] : 0));
  }
}

TEST_CASE("summary writer: typed errors naming what was wrong", "[train][tensorboard]") {
  TempDir dir;
  const std::string blocker = dir.write("not_a_dir", "x");
  require_throws_with<SerializationError>([&] { SummaryWriter tb(blocker + "/run"); }, {blocker});
  require_throws_with<ValueError>([] { SummaryWriter tb(""); }, {"log directory is empty"});
  if (geteuid() != 0) {  // root writes anywhere
    const std::string locked = dir.file("locked");
    fs::create_directories(locked);
    chmod(locked.c_str(), 0500);
    require_throws_with<SerializationError>([&] { SummaryWriter tb(locked); }, {locked});
    chmod(locked.c_str(), 0700);
  }
  SummaryWriter tb(dir.file("run"));
  require_throws_with<ValueError>([&] { tb.add_scalar("", 1, 0); }, {"tag is empty"});
  require_throws_with<ValueError>([&] { tb.add_scalars("m", {{"", 1.0}}, 0); }, {"key is empty"});
  // add_scalars' folder blocked by a file: the folder is named.
  dir.write("run/blocked_x", "x");
  require_throws_with<SerializationError>([&] { tb.add_scalars("blocked", {{"x", 1.0}}, 0); }, {"blocked_x"});
  tb.close();
  tb.close();  // a second close does nothing
  require_throws_with<ValueError>([&] { tb.add_scalar("a", 1, 0); }, {"after close()"});
  require_throws_with<ValueError>([&] { tb.add_scalars("m", {{"k", 1.0}}, 0); }, {"after close()"});
}

TEST_CASE("summary writer: a failing write is a SerializationError naming the file", "[train][tensorboard]") {
  if (!fs::exists("/dev/full") || !fs::exists("/proc/self/fd")) {
    WARN("no /dev/full or /proc/self/fd: the write-error test is not run");
    return;
  }
  TempDir dir;
  SummaryWriter tb(dir.file("run"));
  const std::string path = tb.paths()[0];
  // Swap the writer's descriptor for one on /dev/full, where every write fails (ENOSPC).
  int fd = -1;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (fs::read_symlink(e.path(), ec) == fs::path(path)) fd = std::stoi(e.path().filename().string());
  }
  REQUIRE(fd >= 0);
  const int full = ::open("/dev/full", O_WRONLY);
  REQUIRE(full >= 0);
  REQUIRE(dup2(full, fd) == fd);
  ::close(full);
  tb.add_scalar("a", 1, 1);
  require_throws_with<SerializationError>([&] { tb.flush(); }, {path, "failed"});
  require_throws_with<SerializationError>([&] { tb.close(); }, {path});  // still unwritten; closed all the same
  require_throws_with<ValueError>([&] { tb.add_scalar("a", 1, 2); }, {"after close()"});
}

TEST_CASE("summary writer: MetricsLog mirrors its rows to TensorBoard", "[train][tensorboard]") {
  TempDir dir;
  MetricsLog log(dir.file("metrics"), "run");
  log.write_tensorboard(dir.file("tb"));
  log.log_step(1, 1, {{"loss", 0.75}});
  log.log_step(1, 2, {{"loss", 0.5}});
  log.log_epoch(1, {{"train_loss", 0.6}, {"test_acc", 0.8}});  // flushes the event file too
  REQUIRE(log.tensorboard() != nullptr);
  const std::vector<Event> events = read_events(log.tensorboard()->paths()[0]);
  REQUIRE(events.size() == 5);
  CHECK(events[1].tag == "step/loss");
  CHECK(events[1].step == 1);
  CHECK(events[2].tag == "step/loss");
  CHECK(events[2].step == 2);
  CHECK(one(events[2].value, 2).as_float() == 0.5f);
  CHECK(events[3].tag == "epoch/train_loss");
  CHECK(events[3].step == 1);
  CHECK(one(events[3].value, 2).as_float() == 0.6f);
  CHECK(events[4].tag == "epoch/test_acc");
}
