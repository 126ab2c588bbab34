// Fits y = 3x - 2 (plus a little noise) with a hand-written linear model and plain SGD:
// the smallest complete training loop (forward, loss, backward, update) in Loom.
//
//   ./build/cpu/examples/tiny_regression [epochs] [--profile DIR]
//
// Exits with 1 if the final loss is not below the threshold, so it doubles as a test.
// --profile DIR profiles five epochs (examples/profile_option.h, docs/profiling.md).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "profile_option.h"

int main(int argc, char** argv) {
  int epochs = 200;
  examples::ProfileOption profile;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--profile" && i + 1 < argc)
      profile.dir = argv[++i];
    else
      epochs = std::atoi(argv[i]);
  }
  const int64_t n = 256;
  const double lr = 0.1;
  const double noise_std = 0.05;
  // Noise of std 0.05 leaves a mean squared error of about 0.0025 at the optimum.
  const double threshold = 0.01;

  // The global generator starts from a fixed seed, so every run sees the same data
  // (loom::manual_seed in core/generator.h picks another).
  // Inputs in [-1, 1), targets y = 3x - 2 + noise; both (n, 1).
  loom::Tensor x = loom::rand({n, 1}) * 2.0 - 1.0;
  loom::Tensor y = x * 3.0 - 2.0 + loom::randn({n, 1}) * noise_std;

  // The model: y_hat = x @ w + b, with w (1, 1) and b (1,), starting from zero.
  loom::Tensor w = loom::zeros({1, 1}, loom::TensorOptions().requires_grad());
  loom::Tensor b = loom::zeros({1}, loom::TensorOptions().requires_grad());

  double loss_value = 0.0;
  std::unique_ptr<loom::profiler::Profile> prof = profile.start();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    loom::Tensor loss = (x.matmul(w) + b - y).pow(2).mean();
    loss.backward();
    loss_value = loss.item<double>();

    {
      // The update must not be recorded by autograd (torch.no_grad()).
      loom::NoGradGuard no_grad;
      w.sub_(w.grad() * lr);
      b.sub_(b.grad() * lr);
      w.mutable_grad() = loom::Tensor();  // zero_grad
      b.mutable_grad() = loom::Tensor();
    }

    if (epoch == 1 || epoch % 20 == 0 || epoch == epochs)
      std::printf("epoch %4d  loss %.6f\n", epoch, loss_value);
    examples::profile_step(prof);
  }
  prof.reset();  // writes the profile, if one was asked for

  const double w_learned = w.item<double>();
  const double b_learned = b.item<double>();
  std::printf("learned w = %.4f (true 3), b = %.4f (true -2), final loss %.6f\n", w_learned,
              b_learned, loss_value);
  if (!(loss_value < threshold)) {
    std::printf("FAILED: final loss %.6f is not below %.4f\n", loss_value, threshold);
    return 1;
  }
  std::printf("OK: final loss below %.4f\n", threshold);
  return 0;
}
