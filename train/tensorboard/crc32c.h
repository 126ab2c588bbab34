// CRC-32C (Castagnoli, polynomial 0x1EDC6F41 reflected as 0x82F63B78): the checksum of
// TFRecord files (TensorBoard's event files, summary_writer.h), with the masking those
// files apply to it.
//
//   uint32_t c = train::crc32c("123456789");  // 0xE3069283, the standard check value
//
// crc32c() uses the SSE4.2 crc32 instruction when the CPU has it (checked once, at run
// time) and a table otherwise; both are exposed so tests can check each path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::train {

// crc: the CRC of the bytes before these (0 to start), so a checksum can be built in pieces.
uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);
uint32_t crc32c_portable(std::string_view bytes, uint32_t crc = 0);
// Only when crc32c_hardware_available(); otherwise an InternalError.
uint32_t crc32c_hardware(std::string_view bytes, uint32_t crc = 0);
bool crc32c_hardware_available();

// TFRecord's masked CRC: rotated right by 15 bits plus a constant, so that a CRC stored
// inside CRC'd data does not make the outer checksum trivial.
constexpr uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }
constexpr uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rotated = masked - 0xA282EAD8u;
  return (rotated >> 17) | (rotated << 15);
}

namespace detail {
// The SSE4.2 loop (crc32c_sse42.cpp, the one file compiled with -msse4.2), on the
// pre-inverted crc register. Defined only on x86; call it only after the CPU check.
uint32_t crc32c_sse42_update(uint32_t state, const unsigned char* data, size_t n);
}  // namespace detail

}  // namespace loom::train
