// nn::LayerNorm, as torch.nn.LayerNorm.
#pragma once

#include "nn/module.h"

namespace loom::nn {

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  LayerNormOptions& eps(double e) { eps_ = e; return *this; }
  LayerNormOptions& elementwise_affine(bool a) { elementwise_affine_ = a; return *this; }
  LayerNormOptions& bias(bool b) { bias_ = b; return *this; }  // with elementwise_affine
  Shape normalized_shape_;
  double eps_ = 1e-5;
  bool elementwise_affine_ = true;
  bool bias_ = true;
};

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(int64_t dim) : LayerNormImpl(LayerNormOptions(Shape{dim})) {}
  explicit LayerNormImpl(const LayerNormOptions& options);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;

  LayerNormOptions options;
  Tensor weight;  // normalized_shape, starts at 1
  Tensor bias;    // normalized_shape, starts at 0; undefined with bias(false)
};
using LayerNorm = ModuleHolder<LayerNormImpl>;

}  // namespace loom::nn
