#include "core/device.h"

#include "core/error.h"

namespace loom {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    *this = kCPU;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    int idx = 0;
    if (spec.size() > 4) {
      LOOM_CHECK(spec[4] == ':' && spec.size() > 5, DeviceError, "Device: cannot parse '", spec,
                 "'; expected 'cpu', 'cuda' or 'cuda:N'");
      try {
        size_t used = 0;
        idx = std::stoi(spec.substr(5), &used);
        LOOM_CHECK(used == spec.size() - 5 && idx >= 0, DeviceError, "Device: bad index in '", spec, "'");
      } catch (const std::logic_error&) {
        throw DeviceError("Device: cannot parse '" + spec + "'; expected 'cpu', 'cuda' or 'cuda:N'");
      }
    }
    *this = Device(DeviceType::CUDA, idx);
    return;
  }
  throw DeviceError("Device: cannot parse '" + spec + "'; expected 'cpu', 'cuda' or 'cuda:N'");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace loom
