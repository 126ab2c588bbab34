// Activation and regularisation layers: ReLU, GELU, Tanh, Sigmoid, Dropout.
#pragma once

#include "nn/module.h"

namespace loom::nn {

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& x) { return x.relu(); }
};
using ReLU = ModuleHolder<ReLUImpl>;

class GELUImpl : public Module {
 public:
  // approximate = "none" (erf) or "tanh", as PyTorch.
  explicit GELUImpl(std::string approximate = "none");
  Tensor forward(const Tensor& x) { return x.gelu(tanh_); }
  std::string extra_repr() const override { return tanh_ ? "approximate='tanh'" : "approximate='none'"; }

 private:
  bool tanh_ = false;
};
using GELU = ModuleHolder<GELUImpl>;

class TanhImpl : public Module {
 public:
  TanhImpl() : Module("Tanh") {}
  Tensor forward(const Tensor& x) { return x.tanh(); }
};
using Tanh = ModuleHolder<TanhImpl>;

class SigmoidImpl : public Module {
 public:
  SigmoidImpl() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) { return x.sigmoid(); }
};
using Sigmoid = ModuleHolder<SigmoidImpl>;

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  // Identity in eval mode.
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  double p;
};
using Dropout = ModuleHolder<DropoutImpl>;

}  // namespace loom::nn
