// loom::dropout (core/ops.h): a Bernoulli keep-mask from the default generator, scaled.
#include "core/factories.h"
#include "core/ops.h"

namespace loom {

Tensor dropout(const Tensor& x, double p, bool training) {
  LOOM_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  // The scaled keep-mask (1 / (1 - p) with probability 1 - p, else 0). The unscaled draw is
  // a temporary of this statement: freed before the product is made, not live beside it.
  const Tensor mask = bernoulli(x.sizes(), 1.0 - p, x.options()) / (1.0 - p);
  return x * mask;
}

}  // namespace loom
