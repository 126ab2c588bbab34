// CRC-32C: see crc32c.h.
#include "train/tensorboard/crc32c.h"

#include <array>

#include "core/cpu_features.h"
#include "core/error.h"

namespace loom::train {

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reversed

// Eight tables of 256 ("slicing by 8"): table[k][b] is the CRC of byte b followed by k
// zero bytes, so eight bytes are folded in with eight look-ups instead of 64 shifts.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ ((c & 1u) ? kPolynomial : 0u);
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}
constexpr auto kTables = make_tables();

uint32_t portable_update(uint32_t state, const unsigned char* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    // Little-endian order of the first four bytes, independent of the host's endianness.
    const uint32_t lo = state ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    state = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
            kTables[4][lo >> 24] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^ kTables[0][p[7]];
  }
  for (; n > 0; ++p, --n) state = (state >> 8) ^ kTables[0][(state ^ *p) & 0xFFu];
  return state;
}

const unsigned char* bytes_of(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

bool crc32c_hardware_available() {
  static const bool available = cpu_features().sse42;
  return available;
}

// The register starts at ~crc and ends inverted (the CRC-32C convention), which is what
// lets a CRC continue from a previous one.
uint32_t crc32c_portable(std::string_view bytes, uint32_t crc) {
  return ~portable_update(~crc, bytes_of(bytes), bytes.size());
}

uint32_t crc32c_hardware(std::string_view bytes, uint32_t crc) {
  LOOM_ASSERT(crc32c_hardware_available(), "crc32c_hardware: this CPU has no SSE4.2");
  return ~detail::crc32c_sse42_update(~crc, bytes_of(bytes), bytes.size());
}

uint32_t crc32c(std::string_view bytes, uint32_t crc) {
  return crc32c_hardware_available() ? crc32c_hardware(bytes, crc) : crc32c_portable(bytes, crc);
}

}  // namespace loom::train
