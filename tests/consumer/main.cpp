// Uses an installed Loom through <loom/loom.h>: z = sum(x * y + x), so dz/dx = y + 1.
#include <loom/loom.h>

#include <cmath>
#include <cstdio>

int main() {
  loom::Tensor x = loom::full({2, 3}, 2.0, loom::TensorOptions().requires_grad());
  loom::Tensor y = loom::full({2, 3}, 5.0);
  loom::Tensor z = (x * y + x).sum();
  z.backward();

  const double value = z.item<double>();           // 6 * (2*5 + 2) = 72
  const double grad = x.grad().to_vector<double>()[4];  // 5 + 1 = 6
  std::printf("loom consumer: z = %g, dz/dx = %g, built_with_cuda = %d\n", value, grad,
              int(loom::built_with_cuda()));
  if (std::abs(value - 72.0) > 1e-5 || std::abs(grad - 6.0) > 1e-5) {
    std::printf("loom consumer: MISMATCH (expected z = 72, dz/dx = 6)\n");
    return 1;
  }
  return 0;
}
