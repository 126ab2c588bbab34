#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"

namespace loom::nn::init {

Tensor& uniform_(Tensor& t, double low, double high) {
  NoGradGuard no_grad;
  t.uniform_(low, high);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std) {
  NoGradGuard no_grad;
  t.normal_(mean, std);
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  LOOM_CHECK(t.dim() >= 2, ShapeError, "init: fan in and fan out need a tensor of at least 2 dims, got shape ",
             shape_str(t.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& kaiming_uniform_(Tensor& t, double a) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / double(fan_in_and_fan_out(t).first));
  return uniform_(t, -bound, bound);
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return uniform_(t, -bound, bound);
}

}  // namespace loom::nn::init
