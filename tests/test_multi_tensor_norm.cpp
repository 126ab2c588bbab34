// The fused multi-tensor norm (kernels::multi_tensor_norm, clip_grad_norm_'s total norm):
// against a plain double loop for p = 1, 2, 3, 0.5 and inf over lists of every floating
// dtype with tensors across chunk boundaries; the same bits at 1, 2 and 3 threads (Note
// [fixed-order norm]); NaN and inf; the router's checks; no temporaries (the CPU allocator's
// peak); the emulated cuda:0 giving the CPU's bits with no host sync; and, on a GPU, the
// CUDA kernel against the CPU's, bit-stable, with no host sync.
#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"
#include "cuda_test_util.h"

#include "core/cuda.h"
#include "core/cuda_emulation.h"
#include "core/memory.h"
#include "core/parallel.h"
#include "kernels/kernels.h"
#include "optim/clip_grad.h"

using namespace loom;
using namespace loom::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<double> kNormTypes{1.0, 2.0, 3.0, 0.5, kInf};

// A list of every floating dtype, crossing the 16384-element chunks (and one empty tensor).
std::vector<Tensor> mixed_list(Device device = kCPU) {
  std::vector<Tensor> out{random_nonzero({2 * 16384 + 17}, kFloat32), random_nonzero({3, 5}, kFloat64),
                          random_nonzero({0}, kFloat32),           random_nonzero({16384}, kBFloat16),
                          random_nonzero({1000, 7}, kFloat16),     random_nonzero({1}, kFloat32)};
  for (Tensor& t : out) t = t.to(device);
  return out;
}

// The reference: a plain loop in double over the elements' values.
double reference_norm(const std::vector<Tensor>& tensors, double p) {
  double sum = 0, max = 0;
  for (const Tensor& t : tensors)
    for (double x : t.cpu().to_vector<double>()) {
      if (std::isnan(x)) return NAN;
      sum += std::pow(std::abs(x), p);
      max = std::max(max, std::abs(x));
    }
  return std::isinf(p) ? max : std::pow(sum, 1.0 / p);
}

double norm_of(const std::vector<Tensor>& tensors, double p, Device device = kCPU) {
  const Tensor out = empty({}, TensorOptions(kFloat64).device(device));
  kernels::multi_tensor_norm(tensors, p, out);
  return out.cpu().item<double>();
}

// Relative tolerance: float terms summed in runs of 64 in float, then in double.
double tolerance_of(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.dtype() != kFloat64 && t.numel() > 0) return 2e-6;
  return 1e-12;
}

// random_nonzero values with x[at] = v, in dtype.
Tensor with_value(int64_t n, int64_t at, double v, DType dtype) {
  Tensor t = random_nonzero({n}, kFloat64);
  t.data_ptr<double>()[at] = v;
  return t.to(dtype);
}

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

}  // namespace

TEST_CASE("multi_tensor_norm matches a plain double loop for every p over mixed dtypes", "[norm]") {
  manual_seed(41);
  const std::vector<Tensor> mixed = mixed_list();
  const std::vector<Tensor> doubles{random_nonzero({40000}, kFloat64), random_nonzero({7, 3}, kFloat64)};
  for (const auto* list : {&mixed, &doubles}) {
    for (double p : kNormTypes) {
      INFO("p " << p << ", " << list->size() << " tensors");
      const double want = reference_norm(*list, p), got = norm_of(*list, p);
      CHECK(std::abs(got - want) <= tolerance_of(*list) * want);
      if (std::isinf(p)) CHECK(got == want);  // a max is exact
    }
  }
  // One tensor at a time, too (each alone in its list).
  for (const Tensor& t : mixed)
    for (double p : {2.0, kInf}) CHECK(std::abs(norm_of({t}, p) - reference_norm({t}, p)) <= 2e-6 * reference_norm({t}, p));
  CHECK(norm_of({}, 2.0) == 0.0);
  CHECK(norm_of({zeros({0})}, kInf) == 0.0);
}

TEST_CASE("multi_tensor_norm gives the same bits at 1, 2 and 3 threads", "[norm]") {
  manual_seed(42);
  const std::vector<Tensor> list{random_nonzero({9 * 16384 + 5}, kFloat32), random_nonzero({3 * 16384}, kBFloat16),
                                 random_nonzero({20000}, kFloat64)};
  const int threads = get_num_threads();
  for (double p : kNormTypes) {
    INFO("p " << p);
    std::vector<uint64_t> got;
    for (int n : {1, 2, 3}) {
      set_num_threads(n);
      got.push_back(bits(norm_of(list, p)));
    }
    set_num_threads(threads);
    CHECK(got[0] == got[1]);
    CHECK(got[0] == got[2]);
  }
}

TEST_CASE("multi_tensor_norm: a NaN gives NaN, an inf gives inf", "[norm]") {
  manual_seed(43);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor with_nan = with_value(50000, 30000, NAN, dtype), with_inf = with_value(50000, 17, kInf, dtype);
    for (double p : kNormTypes) {
      INFO(dtype_name(dtype) << " p " << p);
      CHECK(std::isnan(norm_of({random_nonzero({10}), with_nan}, p)));
      CHECK(norm_of({with_inf, random_nonzero({10})}, p) == kInf);
    }
  }
}

TEST_CASE("multi_tensor_norm checks its operands", "[norm]") {
  const Tensor out = empty({}, kFloat64);
  const std::vector<Tensor> ok{random_nonzero({4})};
  require_throws_with<ValueError>([&] { kernels::multi_tensor_norm(ok, 0.0, out); }, {"multi_tensor_norm", "positive", "got 0"});
  require_throws_with<ValueError>([&] { kernels::multi_tensor_norm(ok, NAN, out); }, {"multi_tensor_norm", "positive"});
  require_throws_with<ValueError>([&] { kernels::multi_tensor_norm(ok, 2.0, empty({1}, kFloat64)); },
                                  {"multi_tensor_norm", "() float64", "(1,)"});
  require_throws_with<ValueError>([&] { kernels::multi_tensor_norm(ok, 2.0, empty({}, kFloat32)); },
                                  {"() float64", "float32"});
  require_throws_with<ValueError>([&] { kernels::multi_tensor_norm({random_nonzero({4, 3}).t()}, 2.0, out); },
                                  {"tensor 0", "contiguous", "(3, 4)"});
  require_throws_with<ValueError>([&] { kernels::multi_tensor_norm({ok[0], arange(3)}, 2.0, out); },
                                  {"tensor 1", "floating point", "int64"});
}

TEST_CASE("clip_grad_norm_ makes no temporaries the size of the gradients", "[norm][optim]") {
  manual_seed(44);
  std::vector<Tensor> params;
  int64_t elements = 0;
  for (int64_t n : {300000, 200000, 4096, 33}) {
    params.push_back(zeros({n}).requires_grad_(true));
    params.back().mutable_grad() = random_nonzero({n});
    elements += n;
  }
  // The composition it replaced: |g| in float64, ^p, summed, per parameter.
  cpu::reset_peak_memory_stats();
  size_t base = cpu::memory_allocated();
  {
    Tensor total = zeros({}, kFloat64);
    for (const Tensor& p : params) total = total + p.grad().to(kFloat64).abs().pow(2.0).sum();
  }
  const size_t composed_peak = cpu::max_memory_allocated() - base;
  cpu::reset_peak_memory_stats();
  base = cpu::memory_allocated();
  const double norm = optim::clip_grad_norm_(params, 1e9).item<double>();  // 1e9: no clipping
  const size_t fused_peak = cpu::max_memory_allocated() - base;
  std::printf("clip_grad_norm_ over %lld float32 elements: peak temporaries %zu bytes (the composition: %zu)\n",
              static_cast<long long>(elements), fused_peak, composed_peak);
  CHECK(composed_peak >= size_t(300000) * 8);  // at least one float64 copy of the largest gradient
  CHECK(fused_peak <= 4096);                   // the () float64 result (one allocator block)
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  CHECK(std::abs(norm - reference_norm(grads, 2.0)) <= 2e-6 * norm);
}

TEST_CASE("multi_tensor_norm on the emulated cuda:0: the CPU's bits, no host sync", "[cuda_emulation][norm]") {
  manual_seed(45);
  const std::vector<Tensor> cpu_list = mixed_list();
  std::vector<double> want;
  for (double p : kNormTypes) want.push_back(norm_of(cpu_list, p));
  cuda::EmulationGuard emulate;
  std::vector<Tensor> gpu_list;
  for (const Tensor& t : cpu_list) gpu_list.push_back(t.to(kCUDA));
  for (size_t i = 0; i < kNormTypes.size(); ++i) {
    INFO("p " << kNormTypes[i]);
    const Tensor out = empty({}, TensorOptions(kFloat64).device(kCUDA));
    const uint64_t syncs = cuda::emulation::host_syncs();
    kernels::multi_tensor_norm(gpu_list, kNormTypes[i], out);
    CHECK(cuda::emulation::host_syncs() == syncs);
    CHECK(bits(out.cpu().item<double>()) == bits(want[i]));
  }
}

TEST_CASE("cuda: multi_tensor_norm matches the CPU, repeats bit for bit and waits for nothing", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(46);
  const std::vector<Tensor> cpu_list = mixed_list();
  std::vector<Tensor> gpu_list;
  for (const Tensor& t : cpu_list) gpu_list.push_back(t.to(kCUDA));
  // More tensors than one launch takes (24), and chunks across them.
  std::vector<Tensor> many_cpu, many_gpu;
  for (int i = 0; i < 30; ++i) {
    many_cpu.push_back(random_nonzero({int64_t(5000 * i + 1)}, i % 2 ? kFloat32 : kFloat16));
    many_gpu.push_back(many_cpu.back().to(kCUDA));
  }
  using Lists = std::pair<const std::vector<Tensor>*, const std::vector<Tensor>*>;
  for (const auto& [cpu, gpu] : {Lists{&cpu_list, &gpu_list}, Lists{&many_cpu, &many_gpu}}) {
    for (double p : kNormTypes) {
      INFO("p " << p << ", " << cpu->size() << " tensors");
      const Tensor a = empty({}, TensorOptions(kFloat64).device(kCUDA)), b = empty({}, TensorOptions(kFloat64).device(kCUDA));
      const uint64_t syncs = cuda::host_sync_count();
      kernels::multi_tensor_norm(*gpu, p, a);
      kernels::multi_tensor_norm(*gpu, p, b);
      CHECK(cuda::host_sync_count() == syncs);
      const double got = a.cpu().item<double>(), want = norm_of(*cpu, p);
      CHECK(bits(got) == bits(b.cpu().item<double>()));
      CHECK(std::abs(got - want) <= tolerance_of(*cpu) * want);
      CHECK(std::abs(got - reference_norm(*cpu, p)) <= tolerance_of(*cpu) * want);
    }
  }
  const Tensor with_nan = with_value(40000, 20000, NAN, kFloat32).to(kCUDA);
  for (double p : {2.0, kInf}) CHECK(std::isnan(norm_of({with_nan}, p, kCUDA)));
}
