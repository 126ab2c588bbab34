// Every loss on a GPU against the same loss on the CPU: the value and the input's gradient,
// for each reduction and the options that take another path (class weights, ignored
// targets, label smoothing, pos_weight). Targets live on the GPU with the input, as in a
// training step. "[.cuda]": skipped without a GPU.
#include "catch2_compat.h"

#include <functional>
#include <string>

#include "core/factories.h"
#include "nn/loss.h"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

using namespace loom;
namespace F = loom::nn::functional;

namespace {

using Loss = std::function<Tensor(const Tensor& input, const Tensor& target)>;

// loss(input, target) on both devices; the loss (any reduction, summed against random
// weights when it is not a scalar) and the input's gradient agree to float32 rounding.
void compare_loss(const std::string& what, const Loss& loss, const Tensor& input, const Tensor& target) {
  INFO(what);
  Tensor x_cpu = input.detach().requires_grad_(true);
  Tensor x_gpu = input.detach().to(kCUDA).requires_grad_(true);
  const Tensor y_cpu = loss(x_cpu, target);
  const Tensor y_gpu = loss(x_gpu, target.to(kCUDA));
  REQUIRE(y_gpu.is_cuda());
  test::check_close(y_gpu.cpu(), y_cpu, "loss");
  const Tensor w = test::random_nonzero(y_cpu.sizes());
  (y_cpu * w).sum().backward();
  (y_gpu * w.to(kCUDA)).sum().backward();
  test::check_close(x_gpu.grad().cpu(), x_cpu.grad(), "input gradient");
}

}  // namespace

TEST_CASE("cuda: every loss gives the CPU's value and input gradient", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(21);
  const int64_t N = 37, C = 11;  // not multiples of a warp
  const Tensor logits = test::random_nonzero({N, C});
  Tensor classes = randint(0, C, {N});
  // A few ignored rows (ignore_index -100 by default).
  classes = where(rand({N}).lt(0.2), full({N}, -100, kInt64), classes);
  const Tensor class_weight = rand({C}) + 0.5;
  for (const std::string reduction : {"mean", "sum", "none"}) {
    compare_loss("cross_entropy " + reduction,
                 [&](const Tensor& x, const Tensor& t) {
                   return F::cross_entropy(x, t, nn::CrossEntropyLossOptions().reduction(reduction));
                 },
                 logits, classes);
    compare_loss("cross_entropy weighted, smoothed " + reduction,
                 [&](const Tensor& x, const Tensor& t) {
                   return F::cross_entropy(x, t, nn::CrossEntropyLossOptions()
                                                     .weight(class_weight.to(x.device()))
                                                     .label_smoothing(0.1)
                                                     .reduction(reduction));
                 },
                 logits, classes);
    compare_loss("nll_loss " + reduction,
                 [&](const Tensor& x, const Tensor& t) {
                   return F::nll_loss(x.log_softmax(1), t, nn::NLLLossOptions().reduction(reduction));
                 },
                 logits, classes);
    const Tensor pred = test::random_nonzero({N, 5}), goal = test::random_nonzero({N, 5});
    compare_loss("mse " + reduction, [&](const Tensor& x, const Tensor& t) { return F::mse_loss(x, t, reduction); },
                 pred, goal);
    compare_loss("l1 " + reduction, [&](const Tensor& x, const Tensor& t) { return F::l1_loss(x, t, reduction); },
                 pred, goal);
    compare_loss("smooth_l1 " + reduction,
                 [&](const Tensor& x, const Tensor& t) {
                   return F::smooth_l1_loss(x, t, nn::SmoothL1LossOptions().beta(0.5).reduction(reduction));
                 },
                 pred, goal);
    const Tensor labels = rand({N, 5}).lt(0.4).to(kFloat32), pos_weight = rand({5}) + 0.5;
    compare_loss("bce_with_logits " + reduction,
                 [&](const Tensor& x, const Tensor& t) {
                   return F::binary_cross_entropy_with_logits(
                       x, t, nn::BCEWithLogitsLossOptions().pos_weight(pos_weight.to(x.device())).reduction(reduction));
                 },
                 pred, labels);
  }
}

TEST_CASE("cuda: a loss module's weights follow ->to(kCUDA), and a target on the CPU is named", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(24);
  const Tensor w = rand({6}) + 0.5, x = test::random_nonzero({9, 6}), y = randint(0, 6, {9});
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(w));
  const Tensor want = ce(x, y);
  ce->to(kCUDA);
  const Tensor got = ce(x.to(kCUDA), y.to(kCUDA));
  REQUIRE(got.is_cuda());
  test::check_close(got.cpu(), want, "weighted cross_entropy");
  test::require_throws_with<DeviceError>([&] { ce(x.to(kCUDA), y); }, {"cross_entropy", "target", "cpu"});
}
