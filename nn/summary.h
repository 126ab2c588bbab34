// nn::summary(model, input): one forward pass on `input` and a table of every module
// (as torchinfo.summary): its dotted name and type, the shape of its output, and its
// parameter count (its own and its children's), then the totals.
//
//   auto model = std::make_shared<Net>();
//   std::cout << nn::summary(*model, randn({1, 4}));
//
// The shapes come from forward hooks (Module::register_forward_hook), so they are seen for
// the modules called through their handles (fc(x)); the model itself may be a handle, a
// shared_ptr or the module (owned by a shared_ptr, as named_modules needs). A module that
// the forward pass never calls shows "-", one called n > 1 times shows its first output
// and "x n". Runs without gradients, in the model's current mode; the hooks are removed
// afterwards, also when forward throws.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/module.h"

namespace loom::nn {

// Hooks on every module below root that record their outputs while it lives.
class SummaryRecorder {
 public:
  explicit SummaryRecorder(Module& root);
  ~SummaryRecorder();
  SummaryRecorder(const SummaryRecorder&) = delete;
  SummaryRecorder& operator=(const SummaryRecorder&) = delete;
  // The table; root_output is the model's output (the root is not called through a handle).
  std::string table(const Tensor& root_output) const;

 private:
  struct Row {
    std::string name;
    std::shared_ptr<Module> module;
    int64_t hook = -1;
    Shape first_output;
    bool has_output = false;
    int64_t calls = 0;
  };
  std::vector<Row> rows_;
};

template <typename Impl>
std::string summary(const ModuleHolder<Impl>& model, const Tensor& input) {
  SummaryRecorder recorder(*model);
  NoGradGuard no_grad;
  return recorder.table(detail::hook_output(model->forward(input)));
}

template <typename M>
  requires std::is_base_of_v<Module, M>
std::string summary(M& model, const Tensor& input) {
  SummaryRecorder recorder(model);
  NoGradGuard no_grad;
  return recorder.table(detail::hook_output(model.forward(input)));
}

template <typename M>
std::string summary(const std::shared_ptr<M>& model, const Tensor& input) {
  return summary(*model, input);
}

}  // namespace loom::nn
