// Numerical gradient checking, as torch.autograd.gradcheck.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace loom {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// Compares the Jacobian of f at `inputs` computed by autograd with central finite
// differences (f(x + eps) - f(x - eps)) / 2 eps. Inputs that require grad must be float64
// (any strides: views are perturbed through their strides). Returns true, or throws
// AutogradError naming the input, the element and both values at the first mismatch
// (|analytic - numeric| > atol + rtol * |numeric|).
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
               const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace loom
