// libFuzzer target for the safetensors parser (core/safetensors.cpp): any input must either
// parse or throw a loom::Error — never crash, read out of bounds, overflow, or throw
// anything else. What parses must be consistent: its tensors hold no more bytes than the
// input, and it serializes and parses back to the same tensors. Built and run by
// scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const loom::SafetensorsFile f = loom::parse_safetensors(bytes, "fuzz-input");
    uint64_t total = 0;
    for (const auto& [key, t] : f.tensors) {
      uint64_t n = 0;
      if (__builtin_mul_overflow(uint64_t(t.numel()), uint64_t(t.element_size()), &n)) __builtin_trap();
      total += n;
    }
    if (total > size) __builtin_trap();
    const loom::SafetensorsFile again = loom::parse_safetensors(loom::serialize_safetensors(f.tensors, f.metadata));
    if (again.metadata != f.metadata || again.tensors.size() != f.tensors.size()) __builtin_trap();
    for (const auto& [key, t] : f.tensors) {
      const loom::Tensor& u = again.tensors.at(key);
      if (u.dtype() != t.dtype() || u.sizes() != t.sizes() ||
          (t.nbytes() > 0 && std::memcmp(u.data(), t.data(), t.nbytes()) != 0))
        __builtin_trap();
    }
  } catch (const loom::Error&) {
  }
  return 0;
}
