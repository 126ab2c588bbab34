#include "nn/activation.h"

#include <sstream>

#include "nn/functional.h"

namespace loom::nn {

GELUImpl::GELUImpl(std::string approximate) : Module("GELU") {
  LOOM_CHECK(approximate == "none" || approximate == "tanh", ValueError,
             "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
  tanh_ = approximate == "tanh";
}

DropoutImpl::DropoutImpl(double p_) : Module("Dropout"), p(p_) {
  LOOM_CHECK(p >= 0 && p <= 1, ValueError, "Dropout: probability must be in [0, 1], got ", p);
}

Tensor DropoutImpl::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

std::string DropoutImpl::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p << ", inplace=False";
  return os.str();
}

}  // namespace loom::nn
