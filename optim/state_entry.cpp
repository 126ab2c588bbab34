#include "optim/state_entry.h"

#include <cmath>

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

int64_t count_entry(const StateDict& state, const std::string& key, const std::string& who) {
  const int64_t v = state_entry(state, key, kInt64, who).item<int64_t>();
  LOOM_CHECK(v >= 0, ValueError, who, ".load_state_dict: '", key, "' must be non-negative, got ", v);
  LOOM_CHECK(v <= kMaxStateCount, ValueError, who, ".load_state_dict: '", key, "' must be at most 2^62, got ", v);
  return v;
}

double real_entry(const StateDict& state, const std::string& key, const std::string& who) {
  const double v = state_entry(state, key, kFloat64, who).item<double>();
  LOOM_CHECK(!std::isnan(v), ValueError, who, ".load_state_dict: '", key, "' is NaN");
  return v;
}

void check_no_unexpected_keys(const StateDict& state, const std::set<std::string>& known, const std::string& who) {
  std::string unexpected;
  for (const auto& [key, value] : state)
    if (!known.count(key)) unexpected += (unexpected.empty() ? "'" : ", '") + key + "'";
  LOOM_CHECK(unexpected.empty(), ValueError, who, ".load_state_dict: unexpected keys ", unexpected,
             " (a state dict of another ", who, "?)");
}

}  // namespace loom::optim
