#include "nn/layer_norm.h"

#include <sstream>

#include "core/factories.h"
#include "nn/functional.h"

namespace loom::nn {

LayerNormImpl::LayerNormImpl(const LayerNormOptions& o) : Module("LayerNorm"), options(o) {
  LOOM_CHECK(!o.normalized_shape_.empty(), ValueError, "LayerNorm: normalized_shape must not be empty");
  for (int64_t s : o.normalized_shape_)
    LOOM_CHECK(s > 0, ValueError, "LayerNorm: bad normalized_shape ", shape_str(o.normalized_shape_));
  if (o.elementwise_affine_) {
    weight = register_parameter("weight", ones(o.normalized_shape_));
    if (o.bias_) bias = register_parameter("bias", zeros(o.normalized_shape_));
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return functional::layer_norm(x, options.normalized_shape_, weight, bias, options.eps_);
}

std::string LayerNormImpl::extra_repr() const {
  std::ostringstream os;
  os << shape_str(options.normalized_shape_) << ", eps=" << options.eps_
     << ", elementwise_affine=" << (options.elementwise_affine_ ? "True" : "False");
  if (!options.bias_) os << ", bias=False";
  return os.str();
}

}  // namespace loom::nn
