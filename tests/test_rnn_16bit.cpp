// 16-bit recurrent layers on the CPU (Note [16-bit recurrent layers on the CPU]): under
// bfloat16 autocast, and as float16 modules, against the same layers in float32 on the
// same values rounded to 16 bits, forward and every gradient, for each bfloat16 GEMM
// kernel (the avx512_bf16 one in "[.avx512bf16]", skipped on a CPU without it).
#include "test_util.h"
#include "bf16_kernel_test_util.h"

using namespace loom;
using namespace loom::test;
using kernels::cpu::Bf16GemmKernel;

namespace {

// |a - b| <= tol · max|b| elementwise (one scale for the tensor: 16-bit rounding of every
// operand, accumulated over steps, is relative to the tensor's magnitude, not per element).
void check_near(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  INFO(what << ": shapes " << shape_str(a.sizes()) << " and " << shape_str(b.sizes()));
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> av = values(a), bv = values(b);
  double scale = 0;
  for (double v : bv) scale = std::max(scale, std::abs(v));
  REQUIRE(scale > 0);
  for (size_t i = 0; i < av.size(); ++i) {
    INFO("element " << i << ": " << av[i] << " vs " << bv[i] << " (scale " << scale << ")");
    REQUIRE(std::abs(av[i] - bv[i]) <= tol * scale);
  }
}

// A module's parameters rounded through dtype and back (what a 16-bit run multiplies).
void round_parameters(nn::Module& m, DType dtype) {
  NoGradGuard no_grad;
  for (Tensor& p : m.parameters()) p.copy_(p.to(dtype).to(kFloat32));
}

struct Run {
  Tensor y, h_n, c_n;
  std::vector<Tensor> grads;  // of the parameters, then of x
};

template <typename Layer>
Run run(Layer& layer, const Tensor& x_in, const Tensor& lengths, std::optional<DType> autocast) {
  for (Tensor& p : layer->parameters()) p.mutable_grad() = Tensor();
  const Tensor x = x_in.detach().requires_grad_(true);
  Run r;
  {
    std::optional<amp::AutocastGuard> amp;
    if (autocast) amp.emplace(kCPU, *autocast);
    const nn::RNNOutput out = layer(x, nn::RNNState{}, lengths);
    r.y = out.output;
    r.h_n = out.h_n;
    r.c_n = out.c_n;
  }
  // A loss that reads every output, with fixed random weights.
  manual_seed(11);
  Tensor loss = (r.y.to(kFloat32) * randn(r.y.sizes())).sum() + (r.h_n.to(kFloat32) * randn(r.h_n.sizes())).sum();
  if (r.c_n.defined()) loss = loss + (r.c_n.to(kFloat32) * randn(r.c_n.sizes())).sum();
  loss.backward();
  for (const Tensor& p : layer->parameters()) r.grads.push_back(p.grad());
  r.grads.push_back(x.grad());
  return r;
}

template <typename Layer>
void check_layer_bf16(Layer& layer, const Tensor& x, const Tensor& lengths, const std::string& name) {
  round_parameters(*layer, kBFloat16);
  const Tensor xr = x.to(kBFloat16).to(kFloat32);
  const Run low = run(layer, xr, lengths, kBFloat16);
  const Run ref = run(layer, xr, lengths, std::nullopt);
  // PyTorch 2.15's dtypes under CPU autocast: the outputs in bfloat16, float32 gradients
  // for the float32 parameters and input.
  REQUIRE(low.y.dtype() == kBFloat16);
  REQUIRE(low.h_n.dtype() == kBFloat16);
  check_near(low.y, ref.y, 3e-2, name + " y");
  check_near(low.h_n, ref.h_n, 3e-2, name + " h_n");
  if (ref.c_n.defined()) check_near(low.c_n, ref.c_n, 3e-2, name + " c_n");
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    REQUIRE(low.grads[i].dtype() == kFloat32);
    check_near(low.grads[i], ref.grads[i], 5e-2, name + " gradient " + std::to_string(i));
  }
}

void check_layers_bf16() {
  manual_seed(3);
  const Tensor x = random_nonzero({9, 5, 7}, kFloat32, -1.5, 1.5);  // (T, B, I)
  const Tensor lengths = tensor<int64_t>({9, 4, 7, 1, 9});
  nn::LSTM lstm(nn::RNNOptions(7, 20).num_layers(2).bidirectional(true));
  check_layer_bf16(lstm, x, lengths, "LSTM 2 layers, bidirectional, lengths");
  nn::LSTM lstm_wide(nn::RNNOptions(7, 45));  // hidden size not a multiple of the 32-column panels
  check_layer_bf16(lstm_wide, x, Tensor(), "LSTM hidden 45");
  // tanh: relu's gradient jumps where rounding moves a pre-activation across zero.
  nn::RNN rnn(nn::RNNOptions(7, 13));
  check_layer_bf16(rnn, x, lengths, "RNN tanh");
  // GRU keeps its input's dtype under CPU autocast: it runs in bfloat16 on a bfloat16 input.
  nn::GRU gru(nn::RNNOptions(7, 11).bidirectional(true));
  round_parameters(*gru, kBFloat16);
  amp::AutocastGuard amp(kCPU, kBFloat16);
  const Tensor xb = x.to(kBFloat16);
  const nn::RNNOutput low = gru(xb);
  REQUIRE(low.output.dtype() == kBFloat16);
  REQUIRE(gru(x).output.dtype() == kFloat32);
  amp::AutocastGuard off(kCPU, kBFloat16, /*enabled=*/false);
  check_near(low.output, gru(xb.to(kFloat32)).output, 3e-2, "GRU on a bfloat16 input");
}

}  // namespace

TEST_CASE("16-bit recurrent layers: bfloat16 autocast against float32 on rounded values, float32 GEMM kernel",
          "[rnn_16bit]") {
  const ForcedBf16Kernel forced(Bf16GemmKernel::Float32);
  check_layers_bf16();
}

TEST_CASE("16-bit recurrent layers: bfloat16 autocast against float32 on rounded values, avx512_bf16 kernel",
          "[.avx512bf16]") {
  skip_without_avx512_bf16();
  const ForcedBf16Kernel forced(Bf16GemmKernel::Avx512Bf16);
  check_layers_bf16();
}

TEST_CASE("16-bit recurrent layers: a float16 LSTM and GRU cell match float32 on rounded values", "[rnn_16bit]") {
  manual_seed(4);
  const Tensor x = random_nonzero({6, 3, 5}, kFloat32, -1, 1).to(kFloat16).to(kFloat32);
  nn::LSTM lstm(nn::RNNOptions(5, 8));
  round_parameters(*lstm, kFloat16);
  const nn::RNNOutput ref = lstm(x);
  lstm->to(kFloat16);
  const nn::RNNOutput half = lstm(x.to(kFloat16));
  REQUIRE(half.output.dtype() == kFloat16);
  check_near(half.output, ref.output, 5e-3, "float16 LSTM y");
  check_near(half.c_n, ref.c_n, 5e-3, "float16 LSTM c_n");
  nn::GRUCell cell(5, 8);
  round_parameters(*cell, kFloat16);
  const Tensor h_ref = cell(x.select(0, 0));
  cell->to(kFloat16);
  check_near(cell(x.select(0, 0).to(kFloat16)), h_ref, 5e-3, "float16 GRUCell h");
}
