#include "optim/state_entry.h"

namespace loom::optim {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return std::string(dtype_name(t.dtype())) + " of shape " + shape_str(t.sizes());
}

const Tensor& state_entry(const StateDict& state, const std::string& key, DType dtype, const std::string& who) {
  auto it = state.find(key);
  LOOM_CHECK(it != state.end(), ValueError, who, ".load_state_dict: missing key '", key, "'");
  const Tensor& t = it->second;
  LOOM_CHECK(t.defined() && t.numel() == 1 && t.dtype() == dtype, ValueError, who, ".load_state_dict: '", key,
             "' must be one ", dtype_name(dtype), " value, got ", describe(t));
  return t;
}

}  // namespace loom::optim
