// The SSE4.2 crc32 loop of crc32c.h: the only file built with -msse4.2 (CMakeLists.txt);
// crc32c.cpp calls it only on a CPU that has the instruction.
#include <cstring>

#include "train/tensorboard/crc32c.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace loom::train::detail {

#if defined(__SSE4_2__)
uint32_t crc32c_sse42_update(uint32_t state, const unsigned char* data, size_t n) {
#if defined(__x86_64__)
  uint64_t s = state;
  for (; n >= 8; data += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);  // unaligned loads are fine on x86; memcpy keeps it legal C++
    s = _mm_crc32_u64(s, word);
  }
  state = static_cast<uint32_t>(s);
#endif
  for (; n > 0; ++data, --n) state = _mm_crc32_u8(state, *data);
  return state;
}
#else
// Built without SSE4.2 (not x86): crc32c_hardware_available() is false, so never called.
uint32_t crc32c_sse42_update(uint32_t state, const unsigned char*, size_t) { return state; }
#endif

}  // namespace loom::train::detail
