// The GPU recurrent sweep (kernels/rnn/rnn_sweep.h, Note [step-functor RNN sweep]) run on the
// host with a plain-loop executor, against the CPU kernels (kernels/cpu/rnn.cpp): the
// same outputs, final states, reserve and every gradient, for every mode, both
// directions and ragged lengths. Only the kernel launch itself is left for the GPU tests
// ("[.cuda]" below, which run the layers and cells on a GPU against the CPU).
#include "catch2_compat.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/cuda.h"
#include "core/factories.h"
#include "kernels/kernels.h"
#include "kernels/rnn/rnn_sweep.h"
#include "nn/rnn.h"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

using namespace loom;
using kernels::RNNMode;

namespace {

struct HostForEach {
  template <typename F>
  void operator()(int64_t n, const F& f) const {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
};

kernels::RNNLayerInput random_layer(RNNMode mode, int64_t T, int64_t B, int64_t I, int64_t H, DType dtype,
                                    std::vector<int64_t> lengths, bool reverse, bool bias) {
  const int64_t G = kernels::rnn_gates(mode);
  auto r = [&](const Shape& s) { return test::random_nonzero(s, dtype, -0.8, 0.8); };
  kernels::RNNLayerInput in{mode, r({T, B, I}), r({B, H}), mode == RNNMode::LSTM ? r({B, H}) : Tensor(),
                            r({G * H, I}), r({G * H, H}), bias ? r({G * H}) : Tensor(), bias ? r({G * H}) : Tensor(),
                            std::move(lengths), reverse};
  return in;
}

const char* mode_name(RNNMode m) {
  switch (m) {
    case RNNMode::LSTM: return "LSTM";
    case RNNMode::GRU: return "GRU";
    case RNNMode::RNN_RELU: return "RNN_RELU";
    default: return "RNN_TANH";
  }
}

// Sums of many products (the weight gradients) cancel, so an element can be far smaller
// than its terms: float32 results are compared relative to the tensor's largest element.
// The host sweep runs the CPU's own arithmetic (2e-6); cuDNN and cuBLAS sum in other
// orders, held to the 1e-5 for float32.
void check_same(const Tensor& a, const Tensor& b, const std::string& what, double float32_tol = 2e-6) {
  REQUIRE(a.defined() == b.defined());
  if (!a.defined()) return;
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  double scale = 0;
  for (double v : bv) scale = std::max(scale, std::abs(v));
  const double tol = a.dtype() == kFloat64 ? 1e-12 * (1 + scale) : float32_tol * (1 + scale);
  for (size_t i = 0; i < av.size(); ++i) {
    INFO(what << " element " << i << ": got " << av[i] << ", expected " << bv[i]);
    REQUIRE(std::abs(av[i] - bv[i]) <= tol);
  }
}

}  // namespace

TEST_CASE("rnn sweep (host): forward, reserve and backward equal the CPU kernels", "[cuda_host][rnn]") {
  NoGradGuard no_grad;
  manual_seed(11);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (RNNMode mode : {RNNMode::RNN_TANH, RNNMode::RNN_RELU, RNNMode::LSTM, RNNMode::GRU}) {
      for (bool reverse : {false, true}) {
        for (bool ragged : {false, true}) {
          const int64_t T = 6, B = 5, I = 7, H = 9;  // B·H = 45: no multiple of anything
          std::vector<int64_t> lengths = ragged ? std::vector<int64_t>{6, 2, 5, 1, 6} : std::vector<int64_t>{};
          const kernels::RNNLayerInput in = random_layer(mode, T, B, I, H, dtype, lengths, reverse, !ragged || reverse);
          INFO(mode_name(mode) << " " << dtype_name(dtype) << (reverse ? " reverse" : "") << (ragged ? " ragged" : ""));
          const kernels::RNNLayerOutput cpu = kernels::rnn_layer_forward(in);
          const kernels::RNNLayerOutput sweep = dtype == kFloat32
                                                    ? kernels::rnn_sweep::forward<float>(in, HostForEach{})
                                                    : kernels::rnn_sweep::forward<double>(in, HostForEach{});
          check_same(sweep.y, cpu.y, "y");
          check_same(sweep.h_n, cpu.h_n, "h_n");
          check_same(sweep.c_n, cpu.c_n, "c_n");
          check_same(sweep.reserve.gates, cpu.reserve.gates, "gates");
          check_same(sweep.reserve.h_prev, cpu.reserve.h_prev, "h_prev");
          check_same(sweep.reserve.c_prev, cpu.reserve.c_prev, "c_prev");
          check_same(sweep.reserve.tanh_c, cpu.reserve.tanh_c, "tanh_c");
          check_same(sweep.reserve.gh_n, cpu.reserve.gh_n, "gh_n");

          const Tensor dy = test::random_nonzero({T, B, H}, dtype);
          const Tensor dh_n = test::random_nonzero({B, H}, dtype);
          const Tensor dc_n = mode == RNNMode::LSTM ? test::random_nonzero({B, H}, dtype) : Tensor();
          const kernels::RNNLayerGrads g_cpu = kernels::rnn_layer_backward(in, cpu.reserve, dy, dh_n, dc_n);
          const kernels::RNNLayerGrads g_sweep =
              dtype == kFloat32 ? kernels::rnn_sweep::backward<float>(in, sweep.reserve, dy, dh_n, dc_n, HostForEach{})
                                : kernels::rnn_sweep::backward<double>(in, sweep.reserve, dy, dh_n, dc_n, HostForEach{});
          check_same(g_sweep.dx, g_cpu.dx, "dx");
          check_same(g_sweep.dh0, g_cpu.dh0, "dh0");
          check_same(g_sweep.dc0, g_cpu.dc0, "dc0");
          check_same(g_sweep.dw_ih, g_cpu.dw_ih, "dw_ih");
          check_same(g_sweep.dw_hh, g_cpu.dw_hh, "dw_hh");
          check_same(g_sweep.db_ih, g_cpu.db_ih, "db_ih");
          check_same(g_sweep.db_hh, g_cpu.db_hh, "db_hh");
        }
      }
    }
  }
}

TEST_CASE("rnn sweep (host): undefined output gradients count as zero", "[cuda_host][rnn]") {
  NoGradGuard no_grad;
  manual_seed(12);
  const kernels::RNNLayerInput in = random_layer(RNNMode::LSTM, 4, 3, 5, 6, kFloat64, {}, false, true);
  const kernels::RNNLayerOutput fwd = kernels::rnn_sweep::forward<double>(in, HostForEach{});
  const Tensor dy = test::random_nonzero({4, 3, 6}, kFloat64);
  const kernels::RNNLayerGrads only_dy = kernels::rnn_sweep::backward<double>(in, fwd.reserve, dy, {}, {}, HostForEach{});
  const kernels::RNNLayerGrads zeros_given = kernels::rnn_sweep::backward<double>(
      in, fwd.reserve, dy, zeros({3, 6}, kFloat64), zeros({3, 6}, kFloat64), HostForEach{});
  test::check_close(only_dy.dx, zeros_given.dx, "dx");
  test::check_close(only_dy.dw_hh, zeros_given.dw_hh, "dw_hh");
}

TEST_CASE("rnn sweep (host): lengths left on the device give the host lengths' results", "[cuda_host][rnn]") {
  // A CUDA-graph step's lengths never reach the host (RNNLayerInput::device_lengths): the
  // sweep masks each step with them where they lie, and the CPU kernels read them too.
  NoGradGuard no_grad;
  manual_seed(14);
  for (RNNMode mode : {RNNMode::LSTM, RNNMode::GRU, RNNMode::RNN_TANH}) {
    for (bool reverse : {false, true}) {
      INFO(mode_name(mode) << (reverse ? " reverse" : ""));
      const std::vector<int64_t> lengths{6, 2, 5, 1, 6};
      const kernels::RNNLayerInput on_host = random_layer(mode, 6, 5, 7, 9, kFloat32, lengths, reverse, true);
      kernels::RNNLayerInput on_device = on_host;
      on_device.lengths.clear();
      on_device.device_lengths = from_vector(lengths);
      const kernels::RNNLayerOutput cpu = kernels::rnn_layer_forward(on_host);
      const kernels::RNNLayerOutput cpu_device = kernels::rnn_layer_forward(on_device);
      const kernels::RNNLayerOutput sweep = kernels::rnn_sweep::forward<float>(on_device, HostForEach{});
      REQUIRE(cpu.y.abs().sum().item<double>() > 0);
      REQUIRE(test::bit_equal(cpu_device.y, cpu.y));
      REQUIRE(test::bit_equal(cpu_device.h_n, cpu.h_n));
      check_same(sweep.y, cpu.y, "y");
      check_same(sweep.h_n, cpu.h_n, "h_n");
      check_same(sweep.c_n, cpu.c_n, "c_n");

      const Tensor dy = test::random_nonzero({6, 5, 9});
      const Tensor dh_n = test::random_nonzero({5, 9});
      const Tensor dc_n = mode == RNNMode::LSTM ? test::random_nonzero({5, 9}) : Tensor();
      const kernels::RNNLayerGrads g_cpu = kernels::rnn_layer_backward(on_host, cpu.reserve, dy, dh_n, dc_n);
      const kernels::RNNLayerGrads g_cpu_device =
          kernels::rnn_layer_backward(on_device, cpu_device.reserve, dy, dh_n, dc_n);
      const kernels::RNNLayerGrads g_sweep =
          kernels::rnn_sweep::backward<float>(on_device, sweep.reserve, dy, dh_n, dc_n, HostForEach{});
      REQUIRE(test::bit_equal(g_cpu_device.dw_hh, g_cpu.dw_hh));
      REQUIRE(test::bit_equal(g_cpu_device.dx, g_cpu.dx));
      check_same(g_sweep.dx, g_cpu.dx, "dx");
      check_same(g_sweep.dh0, g_cpu.dh0, "dh0");
      check_same(g_sweep.dw_ih, g_cpu.dw_ih, "dw_ih");
      check_same(g_sweep.dw_hh, g_cpu.dw_hh, "dw_hh");
      check_same(g_sweep.db_hh, g_cpu.db_hh, "db_hh");
    }
  }
  // Given both ways at once, or not as (B) int64, they are refused.
  kernels::RNNLayerInput both = random_layer(RNNMode::GRU, 3, 2, 2, 3, kFloat32, {3, 1}, false, true);
  both.device_lengths = from_vector<int64_t>({3, 1}, {2});
  CHECK_THROWS_AS(kernels::rnn_layer_forward(both), ValueError);
  both.lengths.clear();
  both.device_lengths = from_vector<int32_t>({3, 1}, {2});
  CHECK_THROWS_AS(kernels::rnn_layer_forward(both), ShapeError);
}

// ---- on a GPU: the layers and cells against the CPU ------------------------------------------

namespace {

// Runs `model` on the CPU and a copy on the GPU with the same input, and compares the
// outputs and every parameter's gradient.
template <typename Model, typename Forward>
void compare_on_gpu(Model cpu_model, Model gpu_model, const Tensor& x, Forward forward) {
  gpu_model->load_state_dict(cpu_model->state_dict());
  gpu_model->to(kCUDA);
  Tensor x_cpu = x.detach().requires_grad_(true);
  Tensor x_gpu = x.detach().to(kCUDA).requires_grad_(true);
  Tensor y_cpu = forward(cpu_model, x_cpu);
  Tensor y_gpu = forward(gpu_model, x_gpu);
  constexpr double tol = 1e-5;
  check_same(y_gpu.to(kCPU), y_cpu, "output", tol);
  const Tensor w = test::random_nonzero(y_cpu.sizes());
  (y_cpu * w).sum().backward();
  (y_gpu * w.to(kCUDA)).sum().backward();
  check_same(x_gpu.grad().to(kCPU), x_cpu.grad(), "input grad", tol);
  const nn::NamedTensors pc = cpu_model->named_parameters(), pg = gpu_model->named_parameters();
  REQUIRE(pc.size() == pg.size());
  for (size_t k = 0; k < pc.size(); ++k) {
    REQUIRE(pc[k].first == pg[k].first);  // same registration order
    check_same(pg[k].second.grad().to(kCPU), pc[k].second.grad(), pc[k].first, tol);
  }
}

}  // namespace

TEST_CASE("cuda: LSTM/GRU/RNN layers with lengths match the CPU, forward and backward", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(13);
  const Tensor lengths = from_vector<int64_t>({7, 3, 5, 1, 7}, {5});
  const Tensor x = test::random_nonzero({5, 7, 6});  // (B, T, I), batch_first
  auto opts = nn::RNNOptions(6, 11).num_layers(2).bidirectional(true).batch_first(true);
  auto run = [&](auto& m, const Tensor& in) {
    auto out = m(in, nn::RNNState{}, lengths);
    return cat({out.output.flatten(), out.h_n.flatten()}, 0);
  };
  compare_on_gpu(nn::LSTM(opts), nn::LSTM(opts), x, run);
  compare_on_gpu(nn::GRU(opts), nn::GRU(opts), x, run);
  compare_on_gpu(nn::RNN(opts), nn::RNN(opts), x, run);
}

TEST_CASE("cuda: lengths left on the GPU give the CPU's results, and a bad one is raised at the next sync",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(16);
  const Tensor lengths = from_vector<int64_t>({7, 3, 5, 1, 7}, {5});
  const Tensor x = test::random_nonzero({5, 7, 6});  // (B, T, I), batch_first
  auto opts = nn::RNNOptions(6, 11).num_layers(2).bidirectional(true).batch_first(true);
  auto run = [&](auto& m, const Tensor& in) {  // the lengths where the input lives: no host sync
    auto out = m(in, nn::RNNState{}, lengths.to(in.device()));
    return cat({out.output.flatten(), out.h_n.flatten(), out.c_n.defined() ? out.c_n.flatten() : out.h_n.flatten()}, 0);
  };
  compare_on_gpu(nn::LSTM(opts), nn::LSTM(opts), x, run);
  compare_on_gpu(nn::GRU(opts), nn::GRU(opts), x, run);

  nn::LSTM lstm(opts);
  lstm->to(kCUDA);
  const Tensor bad = from_vector<int64_t>({7, 3, 8, 1, 7}, {5}).to(kCUDA);
  const uint64_t before = cuda::host_sync_count();
  Tensor out = lstm(x.to(kCUDA), nn::RNNState{}, bad).output;  // queued, not thrown
  CHECK(cuda::host_sync_count() == before);
  test::require_throws_with<ValueError>([&] { (void)out.sum().item<float>(); },
                                        {"LSTM: length 8 of sequence 2 is outside [1, 7]", "a copy from the GPU to the host"});
}

TEST_CASE("cuda: LSTMCell/GRUCell/RNNCell match the CPU, forward and backward", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(14);
  const Tensor x = test::random_nonzero({33, 10});  // B = 33: not a multiple of a warp
  compare_on_gpu(nn::LSTMCell(10, 20), nn::LSTMCell(10, 20), x, [](auto& m, const Tensor& in) {
    auto s = m(in);
    return cat({s.h, s.c}, 1);
  });
  compare_on_gpu(nn::GRUCell(10, 20), nn::GRUCell(10, 20), x, [](auto& m, const Tensor& in) { return m(in); });
  compare_on_gpu(nn::RNNCell(10, 20), nn::RNNCell(10, 20), x, [](auto& m, const Tensor& in) { return m(in); });
}

TEST_CASE("cuda: dropout between layers is drawn in train() even without grad, and manual_seed repeats it",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(15);
  nn::LSTM lstm(nn::RNNOptions(6, 16).num_layers(3).dropout(0.5));
  lstm->to(kCUDA);
  const Tensor x = test::random_nonzero({9, 4, 6}).to(kCUDA);  // (T, B, I)
  auto run = [&](uint64_t seed) {
    manual_seed(seed);
    return lstm(x).output.to(kCPU).to_vector<float>();
  };
  std::vector<float> no_grad_a, no_grad_b, other_seed;
  {
    NoGradGuard no_grad;
    no_grad_a = run(1);
    no_grad_b = run(1);
    other_seed = run(2);
  }
  const std::vector<float> with_grad = run(1);
  lstm->eval();
  const std::vector<float> eval = run(1);
  CHECK(no_grad_a == no_grad_b);  // the same seed, the same masks
  CHECK(no_grad_a == with_grad);  // recording gradients does not change the draw
  CHECK(no_grad_a != other_seed);
  CHECK(no_grad_a != eval);       // eval() draws nothing
}
