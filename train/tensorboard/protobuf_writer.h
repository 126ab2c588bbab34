// ProtoWriter: the few Protocol Buffers encodings an event file needs (summary_writer.h),
// written by hand so Loom needs no protobuf library. A message is a run of fields, each a
// key (field number << 3 | wire type, as a varint) and a value:
//
//   ProtoWriter value;                      // tensorboard.Summary.Value
//   value.bytes_field(1, "loss");           //   tag = 1 (length-delimited)
//   value.float_field(2, 0.25f);            //   simple_value = 2 (fixed 32 bits)
//   ProtoWriter summary;
//   summary.message_field(1, value);        // Summary.value = 1 (a nested message)
//
// Integers are little-endian base-128 varints; doubles and floats their IEEE bytes,
// little-endian. Only what is written here is supported: no zigzag (sint) and no groups.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace loom::train {

// Appends v as a varint: 7 bits a byte, low bits first, the high bit set on all but the
// last byte (1 to 10 bytes; a negative int64 is cast to uint64 and takes 10, as protobuf does).
void append_varint(std::string& out, uint64_t v);

class ProtoWriter {
 public:
  void varint_field(int field, uint64_t v);         // int64, uint64, enum, bool
  void double_field(int field, double v);           // wire type 1
  void float_field(int field, float v);             // wire type 5
  void bytes_field(int field, std::string_view v);  // string, bytes
  void message_field(int field, const ProtoWriter& message) { bytes_field(field, message.bytes()); }
  // A repeated double in the packed form (proto3's default): one length-delimited field.
  void packed_doubles_field(int field, std::span<const double> values);

  const std::string& bytes() const { return bytes_; }

 private:
  void key(int field, int wire_type);
  std::string bytes_;
};

}  // namespace loom::train
