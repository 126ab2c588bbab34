// PyTorch's repr, character for character (torch/_tensor_str.py with the default print
// options: precision 4, threshold 1000, edgeitems 3, linewidth 80), except that dtypes
// print as "float64" rather than "torch.float64":
//   tensor([[1.5000, 2.0000],
//           [3.0000, 4.0000]], dtype=float64, requires_grad=True)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/node.h"
#include "core/tensor.h"

namespace loom {
namespace {

constexpr int64_t kSummarizeThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// One format for all elements (PyTorch's _Formatter): integers, or floats in fixed point
// with 4 decimals, as integers with a trailing '.', or in scientific notation; every
// element padded to the widest.
struct Formatter {
  bool floating = false;
  bool boolean = false;
  bool int_mode = true;
  bool sci_mode = false;
  size_t width = 1;

  Formatter(const std::vector<double>& shown, DType dtype)
      : floating(is_floating_point(dtype)), boolean(dtype == kBool) {
    if (!floating) {
      for (double v : shown) width = std::max(width, raw(v).size());
      return;
    }
    double lo = INFINITY, hi = 0;
    for (double v : shown) {
      if (!std::isfinite(v) || v == 0) continue;
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      int_mode &= v == std::ceil(v);
    }
    if (hi == 0) return;  // no non-zero finite value
    sci_mode = hi / lo > 1000.0 || hi > 1e8 || (!int_mode && lo < 1e-4);
    for (double v : shown)
      if (std::isfinite(v) && v != 0) width = std::max(width, raw(v).size());
  }

  // The unpadded text of one element.
  std::string raw(double v) const {
    if (boolean) return v != 0 ? "True" : "False";
    if (!floating) return printf_str("%.0f", v);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return printf_str("%.4e", v);
    if (int_mode) return printf_str("%.0f", v) + ".";
    return printf_str("%.4f", v);
  }

  std::string format(double v) const {
    std::string s = raw(v);
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

// The indices shown along a dim of size n: all, or the first and last kEdgeItems.
std::vector<int64_t> shown_indices(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    idx.push_back(i);
  }
  return idx;
}

struct Printer {
  const std::vector<double>& v;  // row-major values
  const Shape& sizes;
  Shape strides;  // row-major strides of sizes
  bool summarize;

  // The shown elements in print order (PyTorch's get_summarized_data).
  void collect(int64_t dim, int64_t offset, std::vector<double>& out) const {
    if (dim == int64_t(sizes.size())) {
      out.push_back(v[size_t(offset)]);
      return;
    }
    for (int64_t i : shown_indices(sizes[size_t(dim)], summarize))
      collect(dim + 1, offset + i * strides[size_t(dim)], out);
  }

  std::string print(int64_t dim, int64_t offset, size_t indent, const Formatter& f) const {
    const int64_t ndim = int64_t(sizes.size());
    if (dim == ndim) return f.format(v[size_t(offset)]);
    const int64_t n = sizes[size_t(dim)];
    const bool elided = summarize && n > 2 * kEdgeItems;
    std::vector<std::string> items;
    for (int64_t i : shown_indices(n, summarize)) {
      if (elided && i == n - kEdgeItems) items.push_back(dim + 1 == ndim ? " ..." : "...");
      items.push_back(print(dim + 1, offset + i * strides[size_t(dim)], indent + 1, f));
    }
    std::string out = "[";
    if (dim + 1 == ndim) {  // a row: as many elements a line as fit in the line width
      const size_t per_line = size_t(std::max<int64_t>(
          1, (kLineWidth - int64_t(indent)) / int64_t(f.width + 2)));
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        out += items[i];
      }
    } else {
      const std::string sep = "," + std::string(size_t(ndim - dim - 1), '\n') + std::string(indent + 1, ' ');
      for (size_t i = 0; i < items.size(); ++i) out += (i > 0 ? sep : "") + items[i];
    }
    return out + "]";
  }
};

// Appends ", suffix" or, past the line width, ",\n       suffix" (PyTorch's _add_suffixes).
std::string add_suffixes(const std::string& body, const std::vector<std::string>& suffixes,
                         size_t indent) {
  std::string out = body;
  const size_t nl = body.rfind('\n');
  // Python's len(s) - s.rfind('\n') + 1, with rfind = -1 when there is no newline.
  int64_t last_line = int64_t(body.size()) - (nl == std::string::npos ? -1 : int64_t(nl)) + 1;
  for (const std::string& s : suffixes) {
    if (last_line + int64_t(s.size()) + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line = int64_t(indent + s.size());
    } else {
      out += ", " + s;
      last_line += int64_t(s.size()) + 2;
    }
  }
  return out + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  const std::string prefix = "tensor(";
  std::vector<std::string> suffixes;
  if (!is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  std::string body;
  if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + shape_str(sizes()));
    if (dtype() != kFloat32) suffixes.push_back(std::string("dtype=") + dtype_name(dtype()));
    body = "[]";
  } else {
    if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool)
      suffixes.push_back(std::string("dtype=") + dtype_name(dtype()));
    const std::vector<double> v = to_vector<double>();
    Printer p{v, sizes(), contiguous_strides(sizes()), numel() > kSummarizeThreshold};
    std::vector<double> shown;
    p.collect(0, 0, shown);
    body = p.print(0, 0, prefix.size(), Formatter(shown, dtype()));
  }
  if (grad_fn()) suffixes.push_back("grad_fn=<" + grad_fn()->name() + ">");
  else if (requires_grad()) suffixes.push_back("requires_grad=True");
  return add_suffixes(prefix + body, suffixes, prefix.size());
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace loom
