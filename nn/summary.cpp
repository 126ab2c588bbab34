#include "nn/summary.h"

#include <algorithm>
#include <sstream>

namespace loom::nn {

SummaryRecorder::SummaryRecorder(Module& root) {
  for (auto& [name, module] : root.named_modules()) {
    Row row;
    row.name = name;
    row.module = module;
    rows_.push_back(std::move(row));
  }
  // Every row is in place before any hook can run: the hooks hold their row's index.
  for (size_t i = 1; i < rows_.size(); ++i) {
    rows_[i].hook = rows_[i].module->register_forward_hook([this, i](Module&, const Tensor& out) {
      Row& row = rows_[i];
      if (row.calls++ == 0 && out.defined()) row.first_output = out.sizes(), row.has_output = true;
    });
  }
}

SummaryRecorder::~SummaryRecorder() {
  for (Row& row : rows_)
    if (row.hook >= 0) row.module->remove_forward_hook(row.hook);
}

std::string SummaryRecorder::table(const Tensor& root_output) const {
  struct Line {
    std::string layer, shape, params;
  };
  std::vector<Line> lines{{"Layer (type)", "Output shape", "Param #"}};
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& row = rows_[i];
    const int64_t depth = row.name.empty() ? 0 : 1 + std::count(row.name.begin(), row.name.end(), '.');
    std::string layer = std::string(size_t(2 * std::max<int64_t>(depth - 1, 0)), ' ');
    layer += row.name.empty() ? row.module->type_name() : row.name + " (" + row.module->type_name() + ")";
    std::string shape = "-";
    if (i == 0 && root_output.defined()) shape = shape_str(root_output.sizes());
    else if (row.has_output) shape = shape_str(row.first_output);
    if (row.calls > 1) shape += " x " + std::to_string(row.calls);
    lines.push_back({layer, shape, format_count(row.module->parameter_count())});
  }
  size_t w0 = 0, w1 = 0, w2 = 0;
  for (const Line& l : lines) w0 = std::max(w0, l.layer.size()), w1 = std::max(w1, l.shape.size()),
                              w2 = std::max(w2, l.params.size());
  const std::string rule(w0 + w1 + w2 + 6, '=');
  std::ostringstream os;
  auto put = [&](const Line& l) {
    os << l.layer << std::string(w0 - l.layer.size() + 3, ' ') << l.shape << std::string(w1 - l.shape.size() + 3, ' ')
       << std::string(w2 - l.params.size(), ' ') << l.params << "\n";
  };
  put(lines[0]);
  os << rule << "\n";
  for (size_t i = 1; i < lines.size(); ++i) put(lines[i]);
  os << rule << "\n";
  const Module& root = *rows_[0].module;
  const int64_t total = root.parameter_count(), trainable = root.parameter_count(true);
  os << "Total params: " << format_count(total) << "\n"
     << "Trainable params: " << format_count(trainable) << "\n"
     << "Non-trainable params: " << format_count(total - trainable) << "\n";
  return os.str();
}

}  // namespace loom::nn
