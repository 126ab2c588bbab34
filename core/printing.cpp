// PyTorch-like repr: tensor([[1.5000, 2.0000], [...]], dtype=float64, requires_grad=true)
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/node.h"
#include "core/tensor.h"

namespace loom {
namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  bool floating = false;
  bool boolean = false;
  bool scientific = false;
  int width = 1;

  std::string format(double v) const {
    char buf[64];
    if (boolean) return v != 0 ? "True" : "False";
    if (!floating) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else if (std::isnan(v)) std::snprintf(buf, sizeof buf, "nan");
    else if (std::isinf(v)) std::snprintf(buf, sizeof buf, v > 0 ? "inf" : "-inf");
    else if (scientific) std::snprintf(buf, sizeof buf, "%.4e", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
};

void print_rec(std::ostringstream& os, const std::vector<double>& v, const Shape& sizes,
               const Shape& strides, int64_t dim, int64_t offset, const Formatter& f, bool summarize,
               int indent) {
  if (dim == int64_t(sizes.size())) {
    std::string s = f.format(v[size_t(offset)]);
    os << std::string(size_t(std::max<int64_t>(0, f.width - int64_t(s.size()))), ' ') << s;
    return;
  }
  os << "[";
  const int64_t n = sizes[dim];
  const bool last = dim + 1 == int64_t(sizes.size());
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (last ? "..., " : "...,\n" + std::string(size_t(indent + 1), ' '));
      i = n - kEdgeItems;
    }
    print_rec(os, v, sizes, strides, dim + 1, offset + i * strides[dim], f, summarize, indent + 1);
    if (i + 1 < n) {
      if (last) os << ", ";
      else os << "," << std::string(size_t(sizes.size() - dim - 1), '\n') << std::string(size_t(indent + 1), ' ');
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::vector<double> v = to_vector<double>();
  Formatter f;
  f.floating = is_floating_point();
  f.boolean = dtype() == kBool;
  double maxabs = 0, minabs = INFINITY;
  for (double x : v) {
    if (std::isfinite(x)) {
      maxabs = std::max(maxabs, std::abs(x));
      if (x != 0) minabs = std::min(minabs, std::abs(x));
    }
  }
  f.scientific = f.floating && (maxabs >= 1e8 || (minabs < 1e-4 && minabs != INFINITY));
  for (double x : v) f.width = std::max<int>(f.width, int(f.format(x).size()));
  std::ostringstream os;
  const char* prefix = "tensor(";
  os << prefix;
  print_rec(os, v, sizes(), contiguous_strides(sizes()), 0, 0, f, numel() > kSummarizeThreshold, 7);
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool) os << ", dtype=" << dtype();
  if (!is_cpu()) os << ", device='" << device() << "'";
  if (grad_fn()) os << ", grad_fn=<" << grad_fn()->name() << ">";
  else if (requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace loom
