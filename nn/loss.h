// Losses, as torch.nn's: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss,
// BCEWithLogitsLoss. Each has a functional form and a module; reduction is "mean"
// (default), "sum" or "none".
#pragma once

#include <string>

#include "nn/module.h"

namespace loom::nn {

struct CrossEntropyLossOptions {
  CrossEntropyLossOptions& weight(Tensor w) { weight_ = std::move(w); return *this; }
  CrossEntropyLossOptions& ignore_index(int64_t i) { ignore_index_ = i; return *this; }
  CrossEntropyLossOptions& label_smoothing(double s) { label_smoothing_ = s; return *this; }
  CrossEntropyLossOptions& reduction(std::string r) { reduction_ = std::move(r); return *this; }
  Tensor weight_;  // (C), optional class weights
  int64_t ignore_index_ = -100;
  double label_smoothing_ = 0.0;
  std::string reduction_ = "mean";
};
using NLLLossOptions = CrossEntropyLossOptions;  // label_smoothing must stay 0

struct SmoothL1LossOptions {
  SmoothL1LossOptions& beta(double b) { beta_ = b; return *this; }
  SmoothL1LossOptions& reduction(std::string r) { reduction_ = std::move(r); return *this; }
  double beta_ = 1.0;
  std::string reduction_ = "mean";
};

struct BCEWithLogitsLossOptions {
  BCEWithLogitsLossOptions& weight(Tensor w) { weight_ = std::move(w); return *this; }
  BCEWithLogitsLossOptions& pos_weight(Tensor w) { pos_weight_ = std::move(w); return *this; }
  BCEWithLogitsLossOptions& reduction(std::string r) { reduction_ = std::move(r); return *this; }
  Tensor weight_, pos_weight_;
  std::string reduction_ = "mean";
};

namespace functional {
// input (N, C) or (N, C, d1, ...) logits; target (N) or (N, d1, ...) class indices.
// log_softmax and the NLL are fused into one backward node.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyLossOptions& options = {});
// input: log-probabilities, shapes as cross_entropy.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& options = {});
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& options = {});
}  // namespace functional

// The loss modules hold their options and call the functional form.
template <typename Options, Tensor (*Fn)(const Tensor&, const Tensor&, const Options&)>
class LossImpl : public Module {
 public:
  explicit LossImpl(Options options = {}, const char* name = "Loss") : Module(name), options(std::move(options)) {
    // Class weights are buffers, as in PyTorch: they follow ->to(device) and appear in
    // state_dict() ("weight", "pos_weight"); the options keep the same tensor. A detached
    // handle of its own, so that ->to() moves the module's copy, never the caller's tensor.
    if constexpr (requires { this->options.weight_; })
      if (this->options.weight_.defined())
        this->options.weight_ = register_buffer("weight", this->options.weight_.detach());
    if constexpr (requires { this->options.pos_weight_; })
      if (this->options.pos_weight_.defined())
        this->options.pos_weight_ = register_buffer("pos_weight", this->options.pos_weight_.detach());
  }
  Tensor forward(const Tensor& input, const Tensor& target) { return Fn(input, target, options); }
  Options options;
};

class CrossEntropyLossImpl : public LossImpl<CrossEntropyLossOptions, functional::cross_entropy> {
 public:
  explicit CrossEntropyLossImpl(CrossEntropyLossOptions o = {}) : LossImpl(std::move(o), "CrossEntropyLoss") {}
};
class NLLLossImpl : public LossImpl<NLLLossOptions, functional::nll_loss> {
 public:
  explicit NLLLossImpl(NLLLossOptions o = {}) : LossImpl(std::move(o), "NLLLoss") {}
};
class SmoothL1LossImpl : public LossImpl<SmoothL1LossOptions, functional::smooth_l1_loss> {
 public:
  explicit SmoothL1LossImpl(SmoothL1LossOptions o = {}) : LossImpl(std::move(o), "SmoothL1Loss") {}
};
class BCEWithLogitsLossImpl : public LossImpl<BCEWithLogitsLossOptions, functional::binary_cross_entropy_with_logits> {
 public:
  explicit BCEWithLogitsLossImpl(BCEWithLogitsLossOptions o = {}) : LossImpl(std::move(o), "BCEWithLogitsLoss") {}
};

// MSELoss and L1Loss take only a reduction.
class MSELossImpl : public Module {
 public:
  explicit MSELossImpl(std::string reduction = "mean") : Module("MSELoss"), reduction(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::mse_loss(input, target, reduction); }
  std::string reduction;
};
class L1LossImpl : public Module {
 public:
  explicit L1LossImpl(std::string reduction = "mean") : Module("L1Loss"), reduction(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::l1_loss(input, target, reduction); }
  std::string reduction;
};

using CrossEntropyLoss = ModuleHolder<CrossEntropyLossImpl>;
using NLLLoss = ModuleHolder<NLLLossImpl>;
using MSELoss = ModuleHolder<MSELossImpl>;
using L1Loss = ModuleHolder<L1LossImpl>;
using SmoothL1Loss = ModuleHolder<SmoothL1LossImpl>;
using BCEWithLogitsLoss = ModuleHolder<BCEWithLogitsLossImpl>;

}  // namespace loom::nn
