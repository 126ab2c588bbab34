#include "onnx/sizes.h"

#include <cstring>

#include "core/factories.h"

namespace loom::onnx {

int64_t SymSize::at(const std::vector<int64_t>& sizes) const {
  if (symbols.empty()) return offset;
  int64_t p = scale;
  for (size_t s : symbols) p *= sizes[s];
  return p + offset;
}

std::string to_string(const SymSize& s, const std::vector<std::string>& names) {
  if (s.is_constant()) return std::to_string(s.offset);
  std::string out = s.scale == 1 ? "" : s.scale == -1 ? "-" : std::to_string(s.scale) + "·";
  for (size_t i = 0; i < s.symbols.size(); ++i) out += (i ? "·" : "") + names[s.symbols[i]];
  if (s.offset != 0) out += (s.offset > 0 ? " + " : " - ") + std::to_string(s.offset > 0 ? s.offset : -s.offset);
  return out;
}

std::vector<std::vector<int64_t>> run_sizes(const std::vector<int64_t>& example) {
  std::vector<std::vector<int64_t>> runs{example};
  for (size_t s = 0; s < example.size(); ++s) {
    runs.push_back(example);
    runs.back()[s] += 1;
  }
  runs.push_back(example);
  for (int64_t& n : runs.back()) n += 2;
  return runs;
}

std::optional<SymSize> fit_size(const std::vector<int64_t>& values, const std::vector<std::vector<int64_t>>& runs) {
  const size_t n = runs.front().size();
  SymSize s = SymSize::constant(values[0]);
  for (size_t a = 0; a < n; ++a)
    if (values[1 + a] != values[0]) s.symbols.push_back(a);
  if (!s.symbols.empty()) {
    // scale from the first moving axis: v1 - v0 = scale · (∏ at run 1 + a - ∏ at run 0)
    auto product = [&](const std::vector<int64_t>& sizes) {
      int64_t p = 1;
      for (size_t a : s.symbols) p *= sizes[a];
      return p;
    };
    const size_t first = 1 + s.symbols[0];
    const int64_t dv = values[first] - values[0], dp = product(runs[first]) - product(runs[0]);
    if (dp == 0 || dv % dp != 0) return std::nullopt;
    s.scale = dv / dp;
    s.offset = values[0] - s.scale * product(runs[0]);
  }
  for (size_t r = 0; r < runs.size(); ++r)  // every run, the check run included
    if (s.at(runs[r]) != values[r]) return std::nullopt;
  return s;
}

bool is_size_int(const std::string& op, size_t index) {
  if (op == "reshape" || op == "expand" || op == "full") return true;  // every int is a size
  if (op == "select") return index == 1 || index == 2;                  // dim, index, the dim's size
  if (op == "slice") return index == 1 || index == 2 || index == 4;     // dim, start, end, step, size
  return false;
}

bool is_size_float(const std::string& op, size_t index) {
  return op == "arange" && index < 2;  // start, end (step fixed)
}

Tensor grow(const Tensor& t, int64_t axis, int64_t by) {
  const int64_t n = t.size(axis);
  LOOM_CHECK(n > 0, ValueError, "onnx export: dynamic axis ", axis, " of an example input of shape ",
             shape_str(t.sizes()), " is empty");
  std::vector<int64_t> index(size_t(n + by), n - 1);  // 0, 1, ..., n - 1, then n - 1 again
  for (int64_t i = 0; i < n; ++i) index[size_t(i)] = i;
  return t.index_select(axis, from_vector(index).to(t.device()));
}

}  // namespace loom::onnx
