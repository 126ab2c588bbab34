// nn::Linear: y = x W^T + b, as torch.nn.Linear.
#pragma once

#include "nn/module.h"

namespace loom::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  LinearOptions& bias(bool b) { bias_ = b; return *this; }
  int64_t in_features_, out_features_;
  bool bias_ = true;
};

class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  // x (..., in_features) -> (..., out_features)
  Tensor forward(const Tensor& x);
  void reset_parameters();
  std::string extra_repr() const override;

  LinearOptions options;
  Tensor weight;  // (out_features, in_features)
  Tensor bias;    // (out_features), undefined without bias
};

using Linear = ModuleHolder<LinearImpl>;

}  // namespace loom::nn
