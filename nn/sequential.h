// nn::Sequential: modules applied in order, named "0", "1", ... as in PyTorch.
//   nn::Sequential mlp(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace loom::nn {

class SequentialImpl : public Module {
 public:
  template <typename... Holders>
  explicit SequentialImpl(Holders... layers) : Module("Sequential") {
    (push_back(std::move(layers)), ...);
  }
  // Appends a layer whose forward takes and returns one Tensor.
  template <typename Holder>
  void push_back(Holder layer) {
    register_module(std::to_string(steps_.size()), layer);
    steps_.push_back([layer](const Tensor& x) { return layer(x); });
  }
  Tensor forward(const Tensor& x) {
    Tensor y = x;
    for (auto& step : steps_) y = step(y);
    return y;
  }
  size_t size() const { return steps_.size(); }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};
using Sequential = ModuleHolder<SequentialImpl>;

}  // namespace loom::nn
