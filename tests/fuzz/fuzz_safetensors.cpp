// libFuzzer target for the safetensors parser (core/safetensors.cpp): any input must either
// parse or throw a loom::Error — never crash, read out of bounds, overflow, or throw
// anything else. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    loom::SafetensorsFile f = loom::parse_safetensors(bytes, "fuzz-input");
    // What parsed must serialize and parse back to the same tensors.
    const loom::SafetensorsFile again = loom::parse_safetensors(loom::serialize_safetensors(f.tensors, f.metadata));
    if (again.tensors.size() != f.tensors.size() || again.metadata != f.metadata) __builtin_trap();
  } catch (const loom::Error&) {
  }
  return 0;
}
