// ProtoWriter: see protobuf_writer.h.
#include "train/tensorboard/protobuf_writer.h"

#include <bit>

#include "core/error.h"

namespace loom::train {

namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

template <typename Word>
void append_little_endian(std::string& out, Word w) {
  for (size_t i = 0; i < sizeof(Word); ++i) out.push_back(static_cast<char>((w >> (8 * i)) & 0xFF));
}

}  // namespace

void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void ProtoWriter::key(int field, int wire_type) {
  // Field numbers run from 1 to 2^29 - 1 (protobuf's limit).
  LOOM_ASSERT(field >= 1 && field < (1 << 29), "protobuf field number ", field);
  append_varint(bytes_, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint_field(int field, uint64_t v) {
  key(field, kVarint);
  append_varint(bytes_, v);
}

void ProtoWriter::double_field(int field, double v) {
  key(field, kFixed64);
  append_little_endian(bytes_, std::bit_cast<uint64_t>(v));
}

void ProtoWriter::float_field(int field, float v) {
  key(field, kFixed32);
  append_little_endian(bytes_, std::bit_cast<uint32_t>(v));
}

void ProtoWriter::bytes_field(int field, std::string_view v) {
  key(field, kLengthDelimited);
  append_varint(bytes_, v.size());
  bytes_.append(v);
}

void ProtoWriter::packed_doubles_field(int field, std::span<const double> values) {
  key(field, kLengthDelimited);
  append_varint(bytes_, values.size() * sizeof(double));
  for (double v : values) append_little_endian(bytes_, std::bit_cast<uint64_t>(v));
}

}  // namespace loom::train
