// Parameter initialisation, as torch.nn.init. Each fills t in place without recording
// history and returns it.
#pragma once

#include <utility>

#include "core/tensor.h"

namespace loom::nn::init {

Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// (fan_in, fan_out) of a weight: dim 1 and dim 0 times the receptive field.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
// U(-bound, bound) with bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)):
// PyTorch's default for Linear weights uses a = sqrt(5).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0);
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);

}  // namespace loom::nn::init
