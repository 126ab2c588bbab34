#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"

namespace loom {
namespace {

// Address of element `flat` (row-major over sizes) of a CPU float64 tensor.
double* element_ptr(const Tensor& t, int64_t flat) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (flat % t.size(d)) * t.stride(d);
    flat /= t.size(d);
  }
  return static_cast<double*>(t.data()) + offset;
}

std::vector<double> evaluate(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return f(inputs).to_vector<double>();
}

}  // namespace

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
               const std::vector<Tensor>& inputs, GradcheckOptions options) {
  std::vector<size_t> diff_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    LOOM_CHECK(inputs[i].dtype() == kFloat64 && inputs[i].is_cpu(), DTypeError,
               "gradcheck: input ", i, " must be a float64 CPU tensor, got ",
               dtype_name(inputs[i].dtype()), " on ", inputs[i].device());
    diff_inputs.push_back(i);
  }
  LOOM_CHECK(!diff_inputs.empty(), ValueError, "gradcheck: no input requires grad");

  Tensor out = f(inputs);
  LOOM_CHECK(out.requires_grad(), AutogradError, "gradcheck: the output does not require grad");
  LOOM_CHECK(out.dtype() == kFloat64 && out.is_cpu(), ValueError, "gradcheck: f must return a float64 CPU tensor, got ",
             dtype_name(out.dtype()), " on ", out.device());
  const int64_t n_out = out.numel();
  std::vector<Tensor> wrt;
  for (size_t i : diff_inputs) wrt.push_back(inputs[i]);

  // analytic[k][j][e]: d out[j] / d input k element e, one backward per output element.
  std::vector<std::vector<std::vector<double>>> analytic(wrt.size());
  for (size_t k = 0; k < wrt.size(); ++k)
    analytic[k].assign(size_t(n_out), std::vector<double>(size_t(wrt[k].numel()), 0.0));
  for (int64_t j = 0; j < n_out; ++j) {
    Tensor seed = zeros(out.sizes(), out.options());
    static_cast<double*>(seed.data())[j] = 1.0;
    std::vector<Tensor> g = grad({out}, wrt, {seed}, /*retain_graph=*/true);
    for (size_t k = 0; k < wrt.size(); ++k) {
      if (!g[k].defined()) continue;
      LOOM_CHECK(g[k].sizes() == wrt[k].sizes(), AutogradError, "gradcheck: gradient of shape ",
                 shape_str(g[k].sizes()), " for input of shape ", shape_str(wrt[k].sizes()));
      analytic[k][size_t(j)] = g[k].to_vector<double>();
    }
  }

  for (size_t k = 0; k < wrt.size(); ++k) {
    const Tensor& x = wrt[k];
    for (int64_t e = 0; e < x.numel(); ++e) {
      double* p = element_ptr(x, e);
      const double orig = *p;
      *p = orig + options.eps;
      std::vector<double> plus = evaluate(f, inputs);
      *p = orig - options.eps;
      std::vector<double> minus = evaluate(f, inputs);
      *p = orig;
      for (int64_t j = 0; j < n_out; ++j) {
        const double numeric = (plus[size_t(j)] - minus[size_t(j)]) / (2 * options.eps);
        const double a = analytic[k][size_t(j)][size_t(e)];
        LOOM_CHECK(std::abs(a - numeric) <= options.atol + options.rtol * std::abs(numeric),
                   AutogradError, "gradcheck: Jacobian mismatch for input ", diff_inputs[k],
                   " (shape ", shape_str(x.sizes()), "), output element ", j, ", input element ", e,
                   ": analytic ", a, " vs numeric ", numeric);
      }
    }
  }
  return true;
}

}  // namespace loom
