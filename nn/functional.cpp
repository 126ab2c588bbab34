#include "nn/functional.h"

#include "core/ops.h"

namespace loom::nn::functional {

Tensor dropout(const Tensor& x, double p, bool training) { return ::loom::dropout(x, p, training); }

}  // namespace loom::nn::functional
