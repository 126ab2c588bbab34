#include "nn/linear.h"

#include <cmath>

#include "core/factories.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

LinearImpl::LinearImpl(const LinearOptions& o) : Module("Linear"), options(o) {
  LOOM_CHECK(o.in_features_ > 0 && o.out_features_ > 0, ValueError,
             "Linear: in_features and out_features must be positive, got ", o.in_features_, " and ",
             o.out_features_);
  weight = register_parameter("weight", empty({o.out_features_, o.in_features_}));
  if (o.bias_) bias = register_parameter("bias", empty({o.out_features_}));
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  // PyTorch's defaults: kaiming_uniform_(a = sqrt(5)) for the weight, which is
  // U(-1/sqrt(in), 1/sqrt(in)), and the same bound for the bias.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(double(options.in_features_));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& x) { return functional::linear(x, weight, bias); }

std::string LinearImpl::extra_repr() const {
  return "in_features=" + std::to_string(options.in_features_) +
         ", out_features=" + std::to_string(options.out_features_) +
         ", bias=" + (options.bias_ ? "True" : "False");
}

}  // namespace loom::nn
