// 16-bit recurrent layers on the CPU (Note [16-bit recurrent layers on the CPU]): under
// bfloat16 autocast, and as float16 modules, against the same layers in float32 on the
// same values rounded to 16 bits, forward and every gradient, for each bfloat16 GEMM
// kernel (the avx512_bf16 one in "[.avx512bf16]", skipped on a CPU without it). Then the
// same under CUDA autocast (Note [recurrent layers under CUDA autocast]): on the emulated
// cuda:0 (the policy and dtypes, on the CPU kernels) and on a GPU ("[.cuda]": cuDNN's
// float16 layers, the sweep kernels' 16-bit cells); then bfloat16 and float16 models on a
// GPU (cuDNN, or the sweep kernels for bfloat16 before cuDNN 9.13) and cuDNN's persistent
// algorithms where the rule picks them (Note [cuDNN RNN algorithm rule]).
#include <cstdlib>

#include "bf16_kernel_test_util.h"
#include "core/cuda_emulation.h"
#include "cuda_test_util.h"
#include "kernels/rnn/cudnn_rnn_plan.h"
#include "test_util.h"

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
  std::vector<Tensor> outputs;  // on the CPU, in the dtypes the run gave
  std::vector<Tensor> grads;    // of the parameters, then of x, on the CPU
};

// forward(model, x) on `device` (x moved there), under autocast on that device when one
// is given, and a backward through a loss that reads every output with fixed random weights.
template <typename Model, typename Forward>
Run run(Model& model, const Tensor& x_in, Device device, std::optional<DType> autocast, const Forward& forward) {
  for (Tensor& p : model->parameters()) p.mutable_grad() = Tensor();
  const Tensor x = x_in.detach().to(device).requires_grad_(true);
  std::vector<Tensor> outputs;
  {
    std::optional<amp::AutocastGuard> amp;
    if (autocast) amp.emplace(device, *autocast);
    outputs = forward(model, x);
  }
  manual_seed(11);
  Tensor loss = zeros({}, TensorOptions().device(device));
  for (const Tensor& y : outputs) loss = loss + (y.to(kFloat32) * randn(y.sizes()).to(device)).sum();
  loss.backward();
  Run r;
  for (const Tensor& y : outputs) r.outputs.push_back(y.detach().to(kCPU));
  for (const Tensor& p : model->parameters()) r.grads.push_back(p.grad().to(kCPU));
  r.grads.push_back(x.grad().to(kCPU));
  return r;
}

// A 16-bit run against the float32 one on the same rounded values: its outputs in `dtype`,
// float32 gradients for the float32 parameters and input (PyTorch's dtypes under autocast),
// each within tol · the reference's scale.
void check_run(const Run& low, const Run& ref, DType dtype, double tol_out, double tol_grad, const std::string& name) {
  REQUIRE(low.outputs.size() == ref.outputs.size());
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    INFO(name << " output " << i);
    REQUIRE(low.outputs[i].dtype() == dtype);
    check_near(low.outputs[i], ref.outputs[i], tol_out, name + " output " + std::to_string(i));
  }
  REQUIRE(low.grads.size() == ref.grads.size());
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    INFO(name << " gradient " << i);
    REQUIRE(low.grads[i].dtype() == kFloat32);
    check_near(low.grads[i], ref.grads[i], tol_grad, name + " gradient " + std::to_string(i));
  }
}

// y, h_n and c_n (LSTM) of a layer.
auto layer_outputs(const Tensor& lengths) {
  return [lengths](auto& layer, const Tensor& x) {
    const nn::RNNOutput out = layer(x, nn::RNNState{}, lengths);
    std::vector<Tensor> v{out.output, out.h_n};
    if (out.c_n.defined()) v.push_back(out.c_n);
    return v;
  };
}

template <typename Layer>
void check_layer_bf16(Layer& layer, const Tensor& x, const Tensor& lengths, const std::string& name) {
  round_parameters(*layer, kBFloat16);
  const Tensor xr = x.to(kBFloat16).to(kFloat32);
  // PyTorch 2.15's dtypes under CPU autocast: the outputs in bfloat16.
  check_run(run(layer, xr, kCPU, kBFloat16, layer_outputs(lengths)),
            run(layer, xr, kCPU, std::nullopt, layer_outputs(lengths)), kBFloat16, 3e-2, 5e-2, name);
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

// ---- under CUDA autocast: the layers in float16, the cells in the autocast dtype ----------

namespace {

// `model` (float32, on the CPU) and a copy on `device` under CUDA autocast with `autocast`,
// which runs it in `runs_in`: the copy against the CPU model in float32 on the values the
// device multiplies (parameters and input rounded to `runs_in`).
template <typename Model, typename Forward>
void check_under_autocast(Model cpu_model, Model device_model, const Tensor& x, Device device, DType autocast,
                          DType runs_in, const Forward& forward, const std::string& name) {
  round_parameters(*cpu_model, runs_in);
  device_model->load_state_dict(cpu_model->state_dict());
  device_model->to(device);
  const Tensor xr = x.to(runs_in).to(kFloat32);
  // bfloat16 keeps 8 bits, float16 11: the tolerances scale with the rounding.
  const double tol = runs_in == kBFloat16 ? 3e-2 : 1e-2;
  check_run(run(device_model, xr, device, autocast, forward), run(cpu_model, xr, kCPU, std::nullopt, forward),
            runs_in, tol, 5 * tol / 3, name);
}

// LSTM, GRU and RNN (2 layers, bidirectional, with lengths) and each cell on `device` (a GPU,
// or the host-emulated cuda:0) under CUDA float16 and bfloat16 autocast.
void check_cuda_autocast(Device device) {
  manual_seed(5);
  const Tensor x = random_nonzero({5, 7, 6}, kFloat32, -1.5, 1.5);  // (B, T, I), batch_first
  const Tensor lengths = tensor<int64_t>({7, 3, 5, 1, 7});
  const auto opts = nn::RNNOptions(6, 11).num_layers(2).bidirectional(true).batch_first(true);
  // A cell's input (B, I) and a non-zero state (B, H), exact in both 16-bit dtypes (a zero
  // state would leave W_hh's gradient zero).
  const Tensor xc = x.select(1, 0).contiguous();
  const Tensor h0 = random_nonzero({5, 9}, kFloat32, -1, 1).to(kBFloat16).to(kFloat32);
  const Tensor c0 = random_nonzero({5, 9}, kFloat32, -1, 1).to(kBFloat16).to(kFloat32);
  auto lstm_cell = [&](nn::LSTMCell& m, const Tensor& in) {
    const nn::RNNState s = m(in, nn::RNNState{h0.to(in.device()), c0.to(in.device())});
    return std::vector<Tensor>{s.h, s.c};
  };
  auto cell = [&](auto& m, const Tensor& in) { return std::vector<Tensor>{m(in, h0.to(in.device()))}; };
  for (DType autocast : {kFloat16, kBFloat16}) {
    const std::string under = std::string(" under CUDA ") + dtype_name(autocast) + " autocast";
    // The layers in float16 whatever the autocast dtype, as PyTorch's cuDNN wrapper
    // (Note [recurrent layers under CUDA autocast]).
    check_under_autocast(nn::LSTM(opts), nn::LSTM(opts), x, device, autocast, kFloat16, layer_outputs(lengths),
                         "LSTM" + under);
    check_under_autocast(nn::GRU(opts), nn::GRU(opts), x, device, autocast, kFloat16, layer_outputs(lengths),
                         "GRU" + under);
    check_under_autocast(nn::RNN(opts), nn::RNN(opts), x, device, autocast, kFloat16, layer_outputs(lengths),
                         "RNN tanh" + under);
    // The cells in the autocast dtype.
    check_under_autocast(nn::LSTMCell(6, 9), nn::LSTMCell(6, 9), xc, device, autocast, autocast, lstm_cell,
                         "LSTMCell" + under);
    check_under_autocast(nn::GRUCell(6, 9), nn::GRUCell(6, 9), xc, device, autocast, autocast, cell,
                         "GRUCell" + under);
    check_under_autocast(nn::RNNCell(6, 9), nn::RNNCell(6, 9), xc, device, autocast, autocast, cell,
                         "RNNCell tanh" + under);
    check_under_autocast(nn::RNNCell(6, 9, true, "relu"), nn::RNNCell(6, 9, true, "relu"), xc, device, autocast,
                         autocast, cell, "RNNCell relu" + under);
  }
}

}  // namespace

#ifndef LOOM_WITH_CUDA
// The policy and the dtypes on the host-emulated cuda:0, where the CPU's 16-bit kernels run.
TEST_CASE("16-bit recurrent layers under CUDA autocast, on the emulated cuda:0", "[rnn_16bit][cuda_emulation]") {
  cuda::EmulationGuard emulate;
  check_cuda_autocast(kCUDA);
}
#endif

// On a GPU: cuDNN's float16 layers and the sweep kernels' 16-bit cells.
TEST_CASE("cuda: 16-bit recurrent layers and cells under CUDA float16 and bfloat16 autocast match float32",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  check_cuda_autocast(kCUDA);
}

// ---- on a GPU: 16-bit models on cuDNN, and cuDNN's persistent algorithms ----------------------

namespace {

// `model` (float32, on the CPU) against a copy converted to `dtype` on the GPU (no autocast),
// on values rounded to `dtype`: outputs in `dtype`, gradients of the 16-bit parameters and
// input, each within tol · the float32 reference's scale.
template <typename Model, typename Forward>
void check_16bit_model_on_gpu(Model cpu_model, Model gpu_model, const Tensor& x, DType dtype, const Forward& forward,
                              const std::string& name) {
  round_parameters(*cpu_model, dtype);
  gpu_model->load_state_dict(cpu_model->state_dict());
  gpu_model->to(dtype);
  gpu_model->to(kCUDA);
  const Tensor xr = x.to(dtype).to(kFloat32);
  const Run ref = run(cpu_model, xr, kCPU, std::nullopt, forward);
  const Run low = run(gpu_model, xr.to(dtype), kCUDA, std::nullopt, forward);
  const double tol = dtype == kBFloat16 ? 3e-2 : 1e-2;
  REQUIRE(low.outputs.size() == ref.outputs.size());
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    REQUIRE(low.outputs[i].dtype() == dtype);
    check_near(low.outputs[i], ref.outputs[i], tol, name + " output " + std::to_string(i));
  }
  REQUIRE(low.grads.size() == ref.grads.size());
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    REQUIRE(low.grads[i].dtype() == dtype);
    check_near(low.grads[i].to(kFloat32), ref.grads[i], 5 * tol / 3, name + " gradient " + std::to_string(i));
  }
}

// The algorithm the last cuDNN forward ran, and whether cuDNN refused the one asked for.
struct AlgoSeen {
  kernels::cuda::CudnnRNNAlgo algo;
  bool refused;
};

template <typename F>
AlgoSeen algo_of(const F& f) {
  const int64_t fallbacks = kernels::cuda::cudnn_rnn_counters().algo_fallbacks;
  f();
  const kernels::cuda::CudnnRNNCounters& c = kernels::cuda::cudnn_rnn_counters();
  return {c.last_algo, c.algo_fallbacks > fallbacks};
}

}  // namespace

TEST_CASE("cuda: bfloat16 and float16 recurrent models match float32 on rounded values", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(23);
  const Tensor x = random_nonzero({5, 7, 6}, kFloat32, -1.5, 1.5);  // (B, T, I), batch_first
  const Tensor lengths = tensor<int64_t>({7, 3, 5, 1, 7});
  const auto opts = nn::RNNOptions(6, 11).num_layers(2).bidirectional(true).batch_first(true);
  for (DType dtype : {kBFloat16, kFloat16}) {
    // bfloat16 takes cuDNN from 9.13 on, the sweep kernels before (both must match).
    const bool on_cudnn = kernels::rnn_stack_supported(x.to(dtype).to(kCUDA));
    INFO(dtype_name(dtype) << (on_cudnn ? " on cuDNN" : " on the sweep kernels"));
    const int64_t forwards = kernels::cuda::cudnn_rnn_counters().forwards;
    check_16bit_model_on_gpu(nn::LSTM(opts), nn::LSTM(opts), x, dtype, layer_outputs(lengths), "LSTM");
    check_16bit_model_on_gpu(nn::GRU(opts), nn::GRU(opts), x, dtype, layer_outputs(Tensor()), "GRU");
    check_16bit_model_on_gpu(nn::RNN(opts), nn::RNN(opts), x, dtype, layer_outputs(lengths), "RNN tanh");
    CHECK((kernels::cuda::cudnn_rnn_counters().forwards > forwards) == on_cudnn);
  }
}

TEST_CASE("cuda: cuDNN's persistent algorithms match the CPU where the rule picks them", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDNN();
  using kernels::cuda::CudnnRNNAlgo;
  manual_seed(24);
  // PERSIST_STATIC: a float16 LSTM (CUDA autocast) of one layer, sizes multiples of 128, a
  // batch that is a multiple of 8 (Note [cuDNN RNN algorithm rule]; on an SM 8.x/9.x GPU
  // with 98+ SMs).
  {
    const Tensor x = random_nonzero({16, 12, 128}, kFloat32, -1, 1);  // (B, T, I)
    nn::LSTM cpu_lstm(nn::RNNOptions(128, 256).batch_first(true)), gpu_lstm(nn::RNNOptions(128, 256).batch_first(true));
    round_parameters(*cpu_lstm, kFloat16);
    gpu_lstm->load_state_dict(cpu_lstm->state_dict());
    gpu_lstm->to(kCUDA);
    const Tensor xr = x.to(kFloat16).to(kFloat32);
    Run low;
    const AlgoSeen seen = algo_of([&] { low = run(gpu_lstm, xr, kCUDA, kFloat16, layer_outputs(Tensor())); });
    // Which algorithm ran (the rule's persist_static on an SM 8.x/9.x GPU of 98+ SMs), for
    // the log of a GPU run.
    WARN("float16 LSTM (128 -> 256, B 16) ran " << kernels::cuda::rnn_algo_name(seen.algo)
                                               << (seen.refused ? " (cuDNN refused persist_static)" : ""));
    check_run(low, run(cpu_lstm, xr, kCPU, std::nullopt, layer_outputs(Tensor())), kFloat16, 1e-2, 5e-2 / 3,
              "float16 LSTM, persist_static");
  }
  // PERSIST_STATIC_SMALL_H: float32 layers of small hidden sizes, against the CPU in float32.
  auto check_small = [](auto cpu_model, auto gpu_model, const std::string& name) {
    const Tensor x = random_nonzero({6, 9, 10}, kFloat32, -1, 1);  // (B, T, I)
    gpu_model->load_state_dict(cpu_model->state_dict());
    gpu_model->to(kCUDA);
    Run got;
    const AlgoSeen seen = algo_of([&] { got = run(gpu_model, x, kCUDA, std::nullopt, layer_outputs(Tensor())); });
    WARN(name << " ran " << kernels::cuda::rnn_algo_name(seen.algo)
              << (seen.refused ? " (cuDNN refused persist_static_small_h)" : ""));
    if (!seen.refused && std::getenv("LOOM_CUDNN_RNN_ALGO") == nullptr)  // the rule's choice
      CHECK(seen.algo == CudnnRNNAlgo::PersistStaticSmallH);
    const Run want = run(cpu_model, x, kCPU, std::nullopt, layer_outputs(Tensor()));
    for (size_t i = 0; i < want.outputs.size(); ++i)
      check_near(got.outputs[i], want.outputs[i], 1e-5, name + " output " + std::to_string(i));
    for (size_t i = 0; i < want.grads.size(); ++i)
      check_near(got.grads[i], want.grads[i], 1e-5, name + " gradient " + std::to_string(i));
  };
  const auto opts = [](int64_t layers) { return nn::RNNOptions(10, 32).num_layers(layers).batch_first(true); };
  check_small(nn::LSTM(opts(1)), nn::LSTM(opts(1)), "LSTM hidden 32");
  check_small(nn::GRU(opts(2)), nn::GRU(opts(2)), "GRU hidden 32, 2 layers");
  check_small(nn::RNN(opts(1)), nn::RNN(opts(1)), "RNN tanh hidden 32");
}

TEST_CASE("cuda: each cuDNN algorithm, forced, matches the CPU in float32 and under float16 autocast", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDNN();
  using kernels::cuda::CudnnRNNAlgo;
  manual_seed(25);
  // One unidirectional layer of sizes multiples of 128 and a batch of 16 (what persist_static
  // takes), hidden 128 (small_h's limit in training): every algorithm may run it, so a GPU
  // run can check each before the rule gives it more configurations (a refused one falls
  // back to STANDARD and must match all the same).
  const Tensor x = random_nonzero({16, 12, 128}, kFloat32, -1, 1);  // (B, T, I)
  const auto opts = nn::RNNOptions(128, 128).batch_first(true);
  for (CudnnRNNAlgo algo : {CudnnRNNAlgo::Standard, CudnnRNNAlgo::PersistStatic, CudnnRNNAlgo::PersistStaticSmallH}) {
    const kernels::cuda::ForceRNNAlgoGuard force(algo);
    for (DType dtype : {kFloat32, kFloat16}) {
      const std::string name = std::string("LSTM 128 -> 128, ") + dtype_name(dtype) + ", forced " +
                               kernels::cuda::rnn_algo_name(algo);
      nn::LSTM cpu_lstm(opts), gpu_lstm(opts);
      if (dtype == kFloat16) round_parameters(*cpu_lstm, kFloat16);
      gpu_lstm->load_state_dict(cpu_lstm->state_dict());
      gpu_lstm->to(kCUDA);
      const Tensor xr = x.to(dtype).to(kFloat32);
      const std::optional<DType> autocast = dtype == kFloat16 ? std::optional<DType>(kFloat16) : std::nullopt;
      Run got;
      const AlgoSeen seen = algo_of([&] { got = run(gpu_lstm, xr, kCUDA, autocast, layer_outputs(Tensor())); });
      WARN(name << " ran " << kernels::cuda::rnn_algo_name(seen.algo) << (seen.refused ? " (refused)" : ""));
      CHECK((seen.algo == algo || seen.algo == CudnnRNNAlgo::Standard));  // forced, or refused earlier
      const Run want = run(cpu_lstm, xr, kCPU, std::nullopt, layer_outputs(Tensor()));
      if (dtype == kFloat16) {
        check_run(got, want, kFloat16, 1e-2, 5e-2 / 3, name);
        continue;
      }
      for (size_t i = 0; i < want.outputs.size(); ++i)
        check_near(got.outputs[i], want.outputs[i], 1e-5, name + " output " + std::to_string(i));
      for (size_t i = 0; i < want.grads.size(); ++i)
        check_near(got.grads[i], want.grads[i], 1e-5, name + " gradient " + std::to_string(i));
    }
  }
}
