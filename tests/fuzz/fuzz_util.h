// What the libFuzzer targets share: a check that says which property broke before it
// aborts (libFuzzer then reports a crash and keeps the input), and the input written to a
// file, since Loom's readers take paths. Built by scripts/fuzz.sh.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "fuzz: property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace loom::fuzz {

// A folder of this process under $TMPDIR (or /tmp), removed when the fuzzer exits.
// scripts/fuzz.sh points TMPDIR at /dev/shm, so the files never reach a disk.
inline const std::string& scratch_dir() {
  struct Dir {
    std::string path;
    Dir() {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-fuzz-XXXXXX";
      FUZZ_CHECK(mkdtemp(pattern.data()) != nullptr);
      path = pattern;
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline std::string scratch_file(const std::string& name) { return scratch_dir() + "/" + name; }

// The input as the file scratch_dir()/name (its extension can matter to a reader),
// rewritten for every input.
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch_file(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  out.close();
  FUZZ_CHECK(out.good());
  return path;
}

}  // namespace loom::fuzz
