// The examples' fingerprint of a trained model: CRC-32C of every parameter's and buffer's
// bytes, in state_dict order. Two runs (ranks, hosts, thread counts under --deterministic)
// that print the same one hold bitwise equal models.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string_view>

#include "loom.h"
#include "train/tensorboard/crc32c.h"

namespace examples {

inline uint32_t weights_crc32c(const loom::nn::Module& model) {
  uint32_t crc = 0;
  for (const auto& [name, t] : model.state_dict()) {
    loom::Tensor c = t.to(loom::kCPU).contiguous();
    crc = loom::train::crc32c(std::string_view(static_cast<const char*>(c.data()), c.nbytes()), crc);
  }
  return crc;
}

// "weights crc32c: 0x1234abcd", the line the reproducibility tests compare.
inline void print_weights_crc32c(const loom::nn::Module& model) {
  std::printf("weights crc32c: 0x%08x\n", static_cast<unsigned>(weights_crc32c(model)));
}

}  // namespace examples
