// Where a tensor lives: the CPU, or CUDA device N.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace loom {

enum class DeviceType : int8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // the CUDA ordinal; always 0 for the CPU

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::CPU ? 0 : i) {}  // NOLINT
  // Parses "cpu", "cuda", "cuda:1"; throws DeviceError otherwise.
  explicit Device(const std::string& spec);

  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const;
};

constexpr Device kCPU{DeviceType::CPU, 0};
constexpr Device kCUDA{DeviceType::CUDA, 0};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace loom
