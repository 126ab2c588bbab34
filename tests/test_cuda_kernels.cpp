// The CUDA kernels of kernels/cuda/ against the CPU ones: elementwise ops (unary, binary,
// where, copy with every cast, fill) over every dtype and memory layout, the random fills
// bit for bit, bmm through cuBLAS, and autograd through CUDA ops. GPU outputs are poisoned
// (NaN, a sentinel, or for bool both values in turn) before a kernel writes them, so an
// element it misses fails.
//
// The "[.cuda]" cases skip themselves without a GPU. The "[cuda_host]" cases run
// everywhere: the loop bodies and index arithmetic of kernels/cuda/launch.cuh are
// host-device code, run here on the CPU over an emulated grid.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "cuda_test_util.h"
#include "elementwise_cases.h"
#include "test_util.h"

#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/kernels.h"
#include "kernels/math/functors.h"
#include "kernels/math/random_math.h"

using namespace loom;
using namespace loom::test;
namespace kc = loom::kernels::cuda;
using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

const std::vector<DType> kAllDTypes{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

// Random non-zero values in [low, high] (test_util.h); bools half true.
Tensor random_input(const Shape& shape, DType dtype, double low = -2.0, double high = 2.0) {
  if (dtype == kBool) return rand(shape, kFloat64).lt(0.5);
  return random_nonzero(shape, dtype, low, high);
}

// ---- memory layouts -----------------------------------------------------------------------

// How a tensor of a given shape sits in memory: a base tensor and a view of it. The
// non-contiguous ones act on the last two dims (transposed, sliced) or the first
// (broadcast), so they need at least two dims.
struct Layout {
  const char* name;
  std::function<Shape(const Shape&)> base_shape;
  std::function<Tensor(const Tensor&, const Shape&)> view;
};

const Layout kContiguous{"contiguous", [](const Shape& s) { return s; },
                         [](const Tensor& base, const Shape&) { return base; }};
const Layout kTransposed{"transposed",
                         [](const Shape& s) {
                           Shape b = s;
                           std::swap(b[b.size() - 2], b[b.size() - 1]);
                           return b;
                         },
                         [](const Tensor& base, const Shape&) { return base.transpose(-2, -1); }};
// Every other row from row 1 (so not vector-aligned), every third column.
const Layout kSliced{"sliced",
                     [](const Shape& s) {
                       Shape b = s;
                       b[b.size() - 2] = 2 * s[s.size() - 2] + 1;
                       b[b.size() - 1] = 3 * s[s.size() - 1];
                       return b;
                     },
                     [](const Tensor& base, const Shape&) {
                       return base.slice(-2, 1, std::nullopt, 2).slice(-1, 0, std::nullopt, 3);
                     }};
// Stride 0 along the first dim (inputs only).
const Layout kBroadcast{"broadcast",
                        [](const Shape& s) {
                          Shape b = s;
                          b[0] = 1;
                          return b;
                        },
                        [](const Tensor& base, const Shape& s) { return base.expand(s); }};

// (output, inputs) layout combinations run for 2-D shapes.
struct LayoutCase {
  const Layout* out;
  const Layout* in;
};
const LayoutCase kLayoutCases[] = {
    {&kContiguous, &kTransposed}, {&kSliced, &kSliced}, {&kTransposed, &kBroadcast}, {&kContiguous, &kBroadcast}};

// ---- the CPU-versus-GPU runner ----------------------------------------------------------------

struct Operand {
  DType dtype;
  const Layout* layout = &kContiguous;
  double low = -2.0, high = 2.0;  // the range of random inputs
};

// What a GPU output is filled with before the kernel runs: NaN for floats (so no expected
// value may be NaN), a sentinel for integers, and for bool both values in turn.
std::vector<Scalar> poisons(DType dtype) {
  if (is_floating_point(dtype)) return {std::numeric_limits<double>::quiet_NaN()};
  if (dtype == kBool) return {true, false};
  return {-123456789};
}

using Kernel = std::function<void(const Tensor& out, const std::vector<Tensor>& inputs)>;

// Runs kernel(out, inputs) on the CPU and on the GPU and compares the outputs with the
// dtype's tolerance (exact for integers and bool). The inputs are random and laid out as
// their operands say, with the same values on both devices.
void compare_with_cpu(const std::string& what, const Shape& shape, const Operand& out, const std::vector<Operand>& ins,
                      const Kernel& kernel) {
  INFO(what << ", output " << out.layout->name << ", inputs " << (ins.empty() ? "-" : ins[0].layout->name));
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Operand& op : ins) {
    Tensor base = random_input(op.layout->base_shape(shape), op.dtype, op.low, op.high);
    cpu_in.push_back(op.layout->view(base, shape));
    gpu_in.push_back(op.layout->view(base.to(kCUDA), shape));
  }
  Tensor expected = out.layout->view(empty(out.layout->base_shape(shape), out.dtype), shape);
  kernel(expected, cpu_in);
  const std::vector<double> want = expected.to_vector<double>();
  REQUIRE(std::none_of(want.begin(), want.end(), [](double v) { return std::isnan(v); }));
  for (const Scalar& poison : poisons(out.dtype)) {
    Tensor base = empty(out.layout->base_shape(shape), TensorOptions(out.dtype).device(kCUDA));
    kernels::fill(base, poison);
    Tensor actual = out.layout->view(base, shape);
    kernel(actual, gpu_in);
    REQUIRE(actual.is_cuda());
    check_close(actual.cpu(), want, out.dtype, what);
  }
}

// The sizes and layouts every elementwise op runs with: 1-D sizes that are not multiples
// of a vector or a block, then 2-D layouts.
void compare_everywhere(const std::string& what, DType out_dtype, const std::vector<Operand>& ins,
                        const Kernel& kernel) {
  for (int64_t n : {1, 7, 1001}) compare_with_cpu(what + " n=" + std::to_string(n), {n}, {out_dtype}, ins, kernel);
  for (const LayoutCase& c : kLayoutCases) {
    std::vector<Operand> laid = ins;
    for (Operand& op : laid) op.layout = c.in;
    compare_with_cpu(what + " 37x29", {37, 29}, {out_dtype, c.out}, laid, kernel);
  }
}

std::string name_of(DType t) { return dtype_name(t); }

// ---- host emulation of the kernels' grid --------------------------------------------------------

// Calls body(thread, threads) for every thread of a grid of `threads`, as a launch would.
template <typename Body>
void emulate_grid(int64_t threads, const Body& body) {
  for (int64_t t = 0; t < threads; ++t) body(t, threads);
}

// Byte offset of row-major element i of t, the plain way.
int64_t naive_byte_offset(const Tensor& t, int64_t i) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (i % t.size(d)) * t.stride(d) * t.element_size();
    i /= t.size(d);
  }
  return offset;
}

bool bits_equal(const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); }

}  // namespace

// =================================================================================================
// Host tests: the index arithmetic and loop bodies of the CUDA kernels, on the CPU.
// =================================================================================================

TEST_CASE("cuda loops (host): the 32-bit IntDivider matches / and %", "[cuda_host]") {
  std::mt19937 rng(3);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int s = 9; s <= 30; ++s) divisors.insert(divisors.end(), {(1u << s) - 1, 1u << s, (1u << s) + 1});
  divisors.push_back(uint32_t(std::numeric_limits<int32_t>::max()));
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % uint32_t(std::numeric_limits<int32_t>::max()));
  const uint32_t max_n = uint32_t(std::numeric_limits<int32_t>::max());
  for (uint32_t d : divisors) {
    kc::IntDivider<uint32_t> div(d);
    std::vector<uint32_t> ns{0, 1, d - 1, d, max_n, max_n - 1, max_n - d + 1};
    if (d < max_n / 3) ns.insert(ns.end(), {d + 1, 2 * d - 1, 2 * d, 3 * d + 1});
    for (int i = 0; i < 100; ++i) ns.push_back(rng() % (max_n + 1u));
    for (uint32_t n : ns) {
      const kc::DivMod<uint32_t> qr = div.divmod(n);
      if (qr.div != n / d || qr.mod != n % d) FAIL(n << " / " << d << ": got " << qr.div << " r " << qr.mod);
    }
  }
}

TEST_CASE("cuda loops (host): offset calculators find every operand's byte offsets", "[cuda_host]") {
  // Three operands of shape (5, 6, 7, 3) in different layouts: a permuted contiguous
  // tensor, a sliced one with steps, and a broadcast one.
  Tensor out = empty({5, 6, 7, 3});
  Tensor permuted = empty({3, 7, 5, 6}).permute({2, 3, 1, 0});
  Tensor sliced = empty({10, 6, 15, 4}).slice(0, 1, std::nullopt, 2).slice(2, 1, std::nullopt, 2).narrow(3, 1, 3);
  Tensor broadcast = empty({1, 6, 1, 3}, kFloat16).expand({5, 6, 7, 3});
  const std::array<const Tensor*, 4> operands{&out, &permuted, &sliced, &broadcast};
  const kernels::cpu::StridedLayout<4> layout = kc::coalesced_layout<4>(operands);
  REQUIRE(kc::fits_in_32_bits<4>(layout));
  const auto calc32 = kc::make_offset_calculator<4, uint32_t>(layout);
  const auto calc64 = kc::make_offset_calculator<4, int64_t>(layout);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const kc::Array<uint32_t, 4> o32 = calc32.get(uint32_t(i));
    const kc::Array<int64_t, 4> o64 = calc64.get(i);
    for (int k = 0; k < 4; ++k) {
      const int64_t want = naive_byte_offset(*operands[size_t(k)], i);
      if (int64_t(o32[k]) != want || o64[k] != want)
        FAIL("element " << i << " operand " << k << ": got " << o32[k] << " / " << o64[k] << ", expected " << want);
    }
  }
  // A contiguous tensor of any rank coalesces to one dim; a transposed one stays 2-D.
  Tensor c4 = empty({2, 3, 4, 5});
  REQUIRE(kc::coalesced_layout<1>({&c4}).sizes == Shape{120});
  Tensor t = empty({4, 6}).t();
  REQUIRE(kc::coalesced_layout<2>({&t, &t}).sizes.size() == 2);
}

TEST_CASE("cuda loops (host): 32-bit indexing and the vector path are chosen only when they apply",
          "[cuda_host]") {
  // 2^32 elements (a broadcast view allocates nothing) need 64-bit indices.
  Tensor one = zeros({1});
  Tensor huge = one.expand({int64_t(1) << 16, int64_t(1) << 16});
  REQUIRE_FALSE(kc::fits_in_32_bits<1>(kc::coalesced_layout<1>({&huge})));
  // So does a byte offset past 2^31 - 1, even with few elements.
  Tensor wide = empty({2, 1}).expand({2, int64_t(1) << 29});  // stride 0: offsets small
  REQUIRE(kc::fits_in_32_bits<1>(kc::coalesced_layout<1>({&wide})));
  kernels::cpu::StridedLayout<1> far;
  far.sizes = {2};
  far.strides[0] = {int64_t(1) << 31};
  REQUIRE_FALSE(kc::fits_in_32_bits<1>(far));
  far.strides[0] = {(int64_t(1) << 31) - 1};
  REQUIRE(kc::fits_in_32_bits<1>(far));

  Tensor a = empty({64}), b = empty({64});
  const std::array<const Tensor*, 2> aligned{&a, &b};
  REQUIRE(kc::can_vectorize<4, 2>(kc::coalesced_layout<2>(aligned), aligned));
  Tensor shifted = empty({65}).narrow(0, 1, 64);  // 4 bytes past a 16-byte boundary
  const std::array<const Tensor*, 2> misaligned{&a, &shifted};
  REQUIRE_FALSE(kc::can_vectorize<4, 2>(kc::coalesced_layout<2>(misaligned), misaligned));
  Tensor m = empty({8, 8}), mt = empty({8, 8}).t();
  const std::array<const Tensor*, 2> transposed{&m, &mt};
  REQUIRE_FALSE(kc::can_vectorize<4, 2>(kc::coalesced_layout<2>(transposed), transposed));
  Tensor row = empty({1, 8}).expand({8, 8});
  const std::array<const Tensor*, 2> broadcast{&m, &row};
  REQUIRE_FALSE(kc::can_vectorize<4, 2>(kc::coalesced_layout<2>(broadcast), broadcast));
  REQUIRE(kc::vector_width<float, float, float>() == 4);
  REQUIRE(kc::vector_width<Half>() == 8);
  REQUIRE(kc::vector_width<bool, double, double>() == 2);
}

TEST_CASE("cuda loops (host): the elementwise loops write each element once, for any grid", "[cuda_host]") {
  for (int64_t n : {1, 7, 8, 1001, 4099}) {
    for (int64_t threads : {1, 5, 768}) {
      INFO("n = " << n << ", threads = " << threads);
      // Vectorised: float a + 2 b, and a half comparison with a bool output.
      Tensor a = random_nonzero({n}), b = random_nonzero({n});
      Tensor want = empty({n});
      kernels::binary(BinaryOp::Add, want, a, b, 2.0);
      Tensor out = full({n}, std::numeric_limits<double>::quiet_NaN());
      int64_t calls = 0;
      const kernels::Binary<BinaryOp::Add, float> add{2.0f};
      auto counted_add = [&](float x, float y) {
        ++calls;
        return add(x, y);
      };
      emulate_grid(threads, [&](int64_t t, int64_t T) {
        kc::vectorized_loop<4>(t, T, n, counted_add, out.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>());
      });
      REQUIRE(calls == n);
      REQUIRE(bits_equal(out, want));

      Tensor ha = random_nonzero({n}, kFloat16), hb = random_nonzero({n}, kFloat16);
      Tensor lt_want = empty({n}, kBool);
      kernels::binary(BinaryOp::Lt, lt_want, ha, hb);
      for (bool poison : {true, false}) {
        Tensor lt = full({n}, poison, kBool);
        emulate_grid(threads, [&](int64_t t, int64_t T) {
          kc::vectorized_loop<8>(t, T, n, kernels::Binary<BinaryOp::Lt, float>{1.0f}, lt.data_ptr<bool>(),
                                 ha.data_ptr<Half>(), hb.data_ptr<Half>());
        });
        REQUIRE(bits_equal(lt, lt_want));
      }
    }
  }
  // Strided: a sliced output, a transposed input and a broadcast one, 32- and 64-bit.
  for (int64_t threads : {1, 7, 512}) {
    Tensor x = random_nonzero({29, 37}).t();
    Tensor y = random_nonzero({1, 29}).expand({37, 29});
    Tensor want = empty({37, 29});
    kernels::binary(BinaryOp::Mul, want, x, y);
    for (bool wide : {false, true}) {
      INFO("threads = " << threads << (wide ? ", 64-bit" : ", 32-bit"));
      Tensor base = full({75, 87}, std::numeric_limits<double>::quiet_NaN());
      Tensor out = base.slice(0, 1, std::nullopt, 2).slice(1, 0, std::nullopt, 3);
      const std::array<const Tensor*, 3> operands{&out, &x, &y};
      const kernels::cpu::StridedLayout<3> layout = kc::coalesced_layout<3>(operands);
      int64_t calls = 0;
      auto counted_mul = [&](float p, float q) {
        ++calls;
        return p * q;
      };
      emulate_grid(threads, [&](int64_t t, int64_t T) {
        if (wide) {
          kc::strided_loop<float, float, float>(t, T, out.numel(), counted_mul,
                                                kc::make_offset_calculator<3, int64_t>(layout),
                                                kc::base_pointers<3>(operands));
        } else {
          kc::strided_loop<float, float, float>(uint32_t(t), uint32_t(T), uint32_t(out.numel()), counted_mul,
                                                kc::make_offset_calculator<3, uint32_t>(layout),
                                                kc::base_pointers<3>(operands));
        }
      });
      REQUIRE(calls == out.numel());
      REQUIRE(bits_equal(out, want));
      // Nothing outside the view was written.
      Tensor rest = base.clone();
      rest.slice(0, 1, std::nullopt, 2).slice(1, 0, std::nullopt, 3).fill_(0.0);
      for (double v : rest.to_vector<double>()) REQUIRE((std::isnan(v) || v == 0.0));
    }
  }
}

TEST_CASE("cuda loops (host): random_loop gives the CPU random fills bit for bit", "[cuda_host]") {
  namespace rm = kernels::random_math;
  const uint64_t seed = 20240611;
  for (int64_t n : {1, 7, 1001}) {
    for (uint64_t offset : {uint64_t(0), uint64_t(5)}) {
      for (DType dt : float_dtypes()) {
        INFO(name_of(dt) << " n = " << n << " offset " << offset);
        dispatch_floating(dt, "test", [&]<typename T>() {
          // Contiguous and transposed destinations (the row-major element order counts).
          for (bool transposed : {false, true}) {
            const Shape shape = transposed ? Shape{n, 3} : Shape{n};
            Tensor want_u = empty(shape, dt), want_n = empty(shape, dt);
            Tensor got_u = transposed ? empty({3, n}, dt).t() : empty(shape, dt);
            Tensor got_n = transposed ? empty({3, n}, dt).t() : empty(shape, dt);
            kernels::uniform(want_u, -1.5, 2.5, seed, offset);
            kernels::normal(want_n, 0.5, 2.0, seed, offset);
            kernels::fill(got_u, std::numeric_limits<double>::quiet_NaN());
            kernels::fill(got_n, std::numeric_limits<double>::quiet_NaN());
            // Fills `got` as the GPU would, over a grid of 7 threads.
            auto emulate_fill = [&](const Tensor& got, const auto& value) {
              const std::array<const Tensor*, 1> ops{&got};
              const auto calc = kc::make_offset_calculator<1, uint32_t>(kc::coalesced_layout<1>(ops));
              emulate_grid(7, [&](int64_t t, int64_t threads) {
                kc::random_loop<T>(uint32_t(t), uint32_t(threads), uint32_t(got.numel()), seed, offset, value, calc,
                                   kc::base_pointers<1>(ops));
              });
            };
            emulate_fill(got_u, [](uint32_t w0, uint32_t w1) { return rm::uniform_value<T>(w0, w1, -1.5, 2.5); });
            emulate_fill(got_n, [](uint32_t w0, uint32_t w1) { return rm::normal_value<T>(w0, w1, 0.5, 2.0); });
            REQUIRE(bits_equal(got_u, want_u));
            REQUIRE(bits_equal(got_n, want_n));
          }
        });
      }
      // bernoulli reads p at each element's offset; randint draws from both words.
      Tensor p = rand({n, 4}).t();
      Tensor want_b = empty({4, n}), want_r = empty({4, n}, kInt64);
      kernels::bernoulli(want_b, p, seed, offset);
      kernels::randint(want_r, -3, 1000, seed, offset);
      Tensor got_b = full({4, n}, -1.0), got_r = full({4, n}, -1, kInt64);
      const std::array<const Tensor*, 2> ops_b{&got_b, &p};
      const std::array<const Tensor*, 1> ops_r{&got_r};
      emulate_grid(5, [&](int64_t t, int64_t threads) {
        kc::random_loop<float, float>(
            t, threads, got_b.numel(), seed, offset,
            [](uint32_t w0, uint32_t, double prob) { return rm::bernoulli_value(w0, prob) ? 1.0f : 0.0f; },
            kc::make_offset_calculator<2, int64_t>(kc::coalesced_layout<2>(ops_b)), kc::base_pointers<2>(ops_b));
        kc::random_loop<int64_t>(
            t, threads, got_r.numel(), seed, offset,
            [](uint32_t w0, uint32_t w1) { return rm::randint_value<int64_t>(w0, w1, -3, 1003); },
            kc::make_offset_calculator<1, int64_t>(kc::coalesced_layout<1>(ops_r)), kc::base_pointers<1>(ops_r));
      });
      REQUIRE(bits_equal(got_b, want_b));
      REQUIRE(got_r.to_vector<int64_t>() == want_r.to_vector<int64_t>());
    }
  }
}

namespace {

// Runs a GEMM plan the way cuBLAS defines it (column-major, op T transposing), in float64
// loops: C = op(first) @ op(second) (+ C when beta = 1) per batch item.
void run_plan_on_host(const kc::GemmPlan& p, const Tensor& out, double beta) {
  const double* x = static_cast<const double*>(p.first.tensor->data());
  const double* y = static_cast<const double*>(p.second.tensor->data());
  double* c = static_cast<double*>(out.data());
  const kc::GemmOperand &fx = p.first, &fy = p.second;
  for (int64_t i = 0; i < p.batch; ++i) {
    for (int64_t col = 0; col < p.n; ++col) {
      for (int64_t row = 0; row < p.m; ++row) {
        double sum = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const double xv = x[i * fx.batch_stride + (fx.transpose ? q + row * fx.ld : row + q * fx.ld)];
          const double yv = y[i * fy.batch_stride + (fy.transpose ? col + q * fy.ld : q + col * fy.ld)];
          sum += xv * yv;
        }
        double& dst = c[i * p.batch_stride_c + row + col * p.ldc];
        dst = beta == 0 ? sum : dst + sum;
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda loops (host): bmm's cuBLAS plan computes the CPU GEMM for every layout", "[cuda_host]") {
  manual_seed(17);
  // (B, M, K, N), with single rows, columns, inner dims and batches.
  const std::vector<std::array<int64_t, 4>> shapes{
      {3, 5, 7, 4}, {1, 1, 6, 1}, {2, 1, 3, 5}, {2, 4, 3, 1}, {2, 3, 1, 2}};
  for (const auto& [B, M, K, N] : shapes) {
    for (const Layout* la : {&kContiguous, &kTransposed, &kBroadcast}) {
      for (const Layout* lb : {&kContiguous, &kTransposed, &kBroadcast}) {
        for (const Layout* lo : {&kContiguous, &kTransposed}) {
          for (double beta : {0.0, 1.0}) {
            INFO("(" << B << ", " << M << ", " << K << ", " << N << ") a " << la->name << ", b " << lb->name
                     << ", out " << lo->name << ", beta " << beta);
            const Shape sa{B, M, K}, sb{B, K, N}, so{B, M, N};
            Tensor a = la->view(random_nonzero(la->base_shape(sa), kFloat64), sa);
            Tensor b = lb->view(random_nonzero(lb->base_shape(sb), kFloat64), sb);
            Tensor o_base = random_nonzero(lo->base_shape(so), kFloat64);
            Tensor want = lo->view(o_base.clone(), so), got = lo->view(o_base.clone(), so);
            kernels::bmm(want, a, b, beta);
            const auto ca = kc::column_major(a), cb = kc::column_major(b), c = kc::writable_column_major(got);
            REQUIRE((ca && cb && c));
            const kc::GemmPlan plan = kc::plan_gemm(got, *c, a, *ca, b, *cb);
            // cuBLAS's leading-dimension rules (else CUBLAS_STATUS_INVALID_VALUE).
            REQUIRE(plan.first.ld >= std::max<int64_t>(1, plan.first.transpose ? plan.k : plan.m));
            REQUIRE(plan.second.ld >= std::max<int64_t>(1, plan.second.transpose ? plan.n : plan.k));
            REQUIRE(plan.ldc >= std::max<int64_t>(1, plan.m));
            run_plan_on_host(plan, got, beta);
            check_close(got, want, "planned GEMM");
          }
        }
      }
    }
  }
  // What cuBLAS cannot take as it is: no unit stride, overlapping rows, overlapping batch items.
  Tensor sliced = kSliced.view(empty(kSliced.base_shape({2, 4, 5}), kFloat64), {2, 4, 5});
  REQUIRE_FALSE(kc::column_major(sliced));
  Tensor rows_overlap = empty({1, 8}, kFloat64).expand({4, 8}).unsqueeze(0);  // row stride 0
  REQUIRE_FALSE(kc::column_major(rows_overlap));
  Tensor batch_overlap = empty({1, 4, 5}, kFloat64).expand({3, 4, 5});
  REQUIRE(kc::column_major(batch_overlap));  // fine to read
  REQUIRE_FALSE(kc::writable_column_major(batch_overlap));  // not to write
}

// =================================================================================================
// GPU tests
// =================================================================================================

TEST_CASE("cuda kernels: unary ops match the CPU for every dtype and layout", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(11);
  for (const UnaryOpCase& c : kUnaryOpCases) {  // every UnaryOp (elementwise_cases.h)
    for (DType dt : kAllDTypes) {
      if (kernels::needs_float(c.op) && !is_floating_point(dt)) continue;
      const DType out_dtype = kernels::outputs_bool(c.op) ? kBool : dt;
      compare_everywhere(op_label(c.op) + " " + name_of(dt), out_dtype, {{dt, &kContiguous, c.low, c.high}},
                         [&](const Tensor& out, const std::vector<Tensor>& in) {
                           kernels::unary(c.op, out, in[0], c.arg0, c.arg1);
                         });
    }
  }
}

TEST_CASE("cuda kernels: binary ops match the CPU for every dtype and layout", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(12);
  for (const BinaryOpCase& c : kBinaryOpCases) {  // every BinaryOp (elementwise_cases.h)
    for (DType dt : kAllDTypes) {
      if (kernels::needs_float(c.op) && !is_floating_point(dt)) continue;
      const DType out_dtype = kernels::outputs_bool(c.op) ? kBool : dt;
      compare_everywhere(op_label(c.op) + " " + name_of(dt), out_dtype, {{dt, &kContiguous, c.a_low, c.a_high}, {dt}},
                         [&](const Tensor& out, const std::vector<Tensor>& in) {
                           kernels::binary(c.op, out, in[0], in[1], kBinaryAlpha);
                         });
    }
  }
}

TEST_CASE("cuda kernels: where matches the CPU for every dtype and layout", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(13);
  for (DType dt : kAllDTypes) {
    compare_everywhere("where " + name_of(dt), dt, {{kBool}, {dt}, {dt}},
                       [](const Tensor& out, const std::vector<Tensor>& in) {
                         kernels::where(out, in[0], in[1], in[2]);
                       });
  }
}

TEST_CASE("cuda kernels: copy converts between every pair of dtypes", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(14);
  for (DType src : kAllDTypes) {
    for (DType dst : kAllDTypes) {
      // Same dtype and contiguous is one memcpy; everything else goes through the kernels.
      compare_everywhere("copy " + name_of(src) + " -> " + name_of(dst), dst, {{src}},
                         [](const Tensor& out, const std::vector<Tensor>& in) { kernels::copy(out, in[0]); });
    }
  }
}

TEST_CASE("cuda kernels: fill writes every element of any layout", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (DType dt : kAllDTypes) {
    const Scalar value = is_floating_point(dt) ? Scalar(2.5) : dt == kBool ? Scalar(true) : Scalar(-7);
    // Two values each (for bool: both), against outputs poisoned with something else.
    for (const Scalar& v : {value, dt == kBool ? Scalar(false) : Scalar(0)}) {
      compare_everywhere("fill " + name_of(dt), dt, {},
                         [&](const Tensor& out, const std::vector<Tensor>&) { kernels::fill(out, v); });
    }
  }
}

TEST_CASE("cuda kernels: sizes that are not multiples of a vector or a block", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(15);
  const int64_t n = 1000003;
  auto exp = [](const Tensor& out, const std::vector<Tensor>& in) { kernels::unary(UnaryOp::Exp, out, in[0]); };
  auto add = [](const Tensor& out, const std::vector<Tensor>& in) {
    kernels::binary(BinaryOp::Add, out, in[0], in[1], 0.5);
  };
  auto copy = [](const Tensor& out, const std::vector<Tensor>& in) { kernels::copy(out, in[0]); };
  for (DType dt : {kFloat32, kFloat16}) {
    compare_with_cpu("exp " + name_of(dt), {n}, {dt}, {{dt}}, exp);
    compare_with_cpu("add " + name_of(dt), {n}, {dt}, {{dt}, {dt}}, add);
  }
  compare_with_cpu("copy float32 -> float16", {n}, {kFloat16}, {{kFloat32}}, copy);
  compare_with_cpu("copy int32 -> float64", {n}, {kFloat64}, {{kInt32}}, copy);
  compare_with_cpu("copy bool -> bool", {n}, {kBool}, {{kBool}}, copy);
  // The same count on the strided path: a broadcast input (stride 0).
  compare_with_cpu("add broadcast", {n, 1}, {kFloat32, &kTransposed}, {{kFloat32, &kBroadcast}, {kFloat32}}, add);
  // Empty tensors are no work and no error.
  Tensor none = empty({0, 5}, TensorOptions().device(kCUDA));
  REQUIRE_NOTHROW(kernels::binary(BinaryOp::Add, none, none, none, 1.0));
  REQUIRE_NOTHROW(kernels::copy(none, none));
}

TEST_CASE("cuda kernels: in-place ops (out aliases an input) match the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(16);
  for (DType dt : {kFloat32, kFloat16, kFloat64, kInt64}) {
    INFO(name_of(dt));
    for (const Layout* layout : {&kContiguous, &kTransposed, &kSliced}) {
      INFO(layout->name);
      const Shape shape{33, 17};
      Tensor a_base = random_input(layout->base_shape(shape), dt), b = random_input(shape, dt);
      Tensor a_cpu = layout->view(a_base.clone(), shape);
      Tensor a_gpu = layout->view(a_base.to(kCUDA), shape);
      Tensor b_gpu = b.to(kCUDA);
      kernels::binary(BinaryOp::Mul, a_cpu, a_cpu, b);
      kernels::binary(BinaryOp::Mul, a_gpu, a_gpu, b_gpu);
      kernels::unary(UnaryOp::AddScalar, a_cpu, a_cpu, 1.5);
      kernels::unary(UnaryOp::AddScalar, a_gpu, a_gpu, 1.5);
      if (is_floating_point(dt)) {
        kernels::unary(UnaryOp::Tanh, a_cpu, a_cpu);
        kernels::unary(UnaryOp::Tanh, a_gpu, a_gpu);
      }
      check_close(a_gpu.cpu(), a_cpu, "in place");
    }
  }
}

TEST_CASE("cuda kernels: random fills equal the CPU's bit for bit", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  auto on_gpu = [](DType dt) { return TensorOptions(dt).device(kCUDA); };
  for (int64_t n : {1, 7, 1001, 1000003}) {
    INFO("n = " << n);
    for (DType dt : float_dtypes()) {
      if (n > 1001 && dt != kFloat32) continue;  // one large size is enough
      INFO(name_of(dt));
      // A first draw of 3 elements leaves the second starting at an odd block.
      manual_seed(99);
      rand({3});
      Tensor cu = rand({n}, dt), cn = randn({n}, dt), cb = bernoulli(rand({n}, dt));
      manual_seed(99);
      rand({3}, on_gpu(kFloat32));
      Tensor gu = rand({n}, on_gpu(dt)), gn = randn({n}, on_gpu(dt)), gb = bernoulli(rand({n}, on_gpu(dt)));
      REQUIRE(gu.is_cuda());
      REQUIRE(bits_equal(gu.cpu(), cu));
      REQUIRE(bits_equal(gb.cpu(), cb));
      if (dt != kFloat64) {
        REQUIRE(bits_equal(gn.cpu(), cn));
      } else {
        // log and cos of CUDA's libm and glibc may differ in the last bit (kernels/math/random_math.h).
        check_close(gn.cpu(), cn.to_vector<double>(), kFloat64, "randn float64");
      }
    }
    for (DType dt : {kInt64, kInt32, kFloat32}) {
      manual_seed(5);
      Tensor c = randint(-3, 1000, {n}, dt);
      manual_seed(5);
      Tensor g = randint(-3, 1000, {n}, on_gpu(dt));
      REQUIRE(bits_equal(g.cpu(), c));
    }
  }
  // The kernels called directly on poisoned destinations, contiguous and strided: the
  // CPU's numbers, in the CPU's row-major order.
  using RandomFill = std::function<void(const Tensor& dst, const Tensor& p)>;
  const std::vector<std::pair<const char*, RandomFill>> fills{
      {"uniform", [](const Tensor& t, const Tensor&) { kernels::uniform(t, -1.0, 3.0, 7, 13); }},
      {"normal", [](const Tensor& t, const Tensor&) { kernels::normal(t, 1.0, 0.5, 8, 3); }},
      {"randint", [](const Tensor& t, const Tensor&) { kernels::randint(t, -4, 9, 9, 1); }},
      {"bernoulli", [](const Tensor& t, const Tensor& p) { kernels::bernoulli(t, p, 10, 2); }},
  };
  const Shape shape{41, 23};
  const Tensor p_cpu = rand(shape), p_gpu = p_cpu.to(kCUDA);
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    for (const Layout* layout : {&kContiguous, &kTransposed, &kSliced}) {
      for (const auto& [name, fill_with] : fills) {
        INFO(name << " " << name_of(dt) << " " << layout->name);
        Tensor c = layout->view(empty(layout->base_shape(shape), dt), shape);
        Tensor g_base = empty(layout->base_shape(shape), on_gpu(dt));
        kernels::fill(g_base, std::numeric_limits<double>::quiet_NaN());
        Tensor g = layout->view(g_base, shape);
        fill_with(c, p_cpu);
        fill_with(g, p_gpu);
        REQUIRE(bits_equal(g.cpu(), c));
      }
    }
  }
}

TEST_CASE("cuda kernels: bernoulli rejects probabilities outside [0, 1]", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  for (double bad : {1.5, -0.25}) {
    Tensor p = rand({100}).to(kCUDA);
    p.narrow(0, 37, 1).fill_(bad);
    require_throws_with<ValueError>([&] { bernoulli(p); }, {"bernoulli", "[0, 1]"});
  }
}

TEST_CASE("cuda kernels: kernels refuse tensors on different devices", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  Tensor g = empty({4}, TensorOptions().device(kCUDA)), c = ones({4});
  require_throws_with<DeviceError>([&] { kernels::copy(g, c); }, {"copy", "one device"});
  require_throws_with<DeviceError>([&] { kernels::binary(BinaryOp::Add, g, g, c, 1.0); }, {"binary"});
  // Output on the CPU, an input on the GPU: refused before the CPU loop reads device memory.
  require_throws_with<DeviceError>([&] { kernels::binary(BinaryOp::Add, c, c, g, 1.0); }, {"binary", "cuda:0"});
  require_throws_with<DeviceError>([&] { kernels::unary(UnaryOp::Neg, c, g, 0, 0); }, {"unary", "cuda:0"});
  Tensor gm = empty({1, 2, 2}, TensorOptions().device(kCUDA));
  require_throws_with<DTypeError>([&] { kernels::bmm(gm, gm, gm.to(kFloat64), 0); }, {"bmm", "one dtype"});
  require_throws_with<ShapeError>([&] { kernels::bmm(gm, gm, empty({1, 3, 2}, TensorOptions().device(kCUDA)), 0); },
                                  {"bmm"});
}

namespace {

// out (B, M, N) = a @ b (+ out) on the CPU and the GPU, a and b random in dtype and laid
// out as given; compared with an explicit tolerance.
void compare_bmm(const std::string& what, int64_t B, int64_t M, int64_t K, int64_t N, DType dt, const Layout& la,
                 const Layout& lb, const Layout& lout, double beta, Tolerance tol) {
  INFO(what << " " << name_of(dt) << " (" << B << ", " << M << ", " << K << ", " << N << ") a " << la.name << ", b "
            << lb.name << ", out " << lout.name << ", beta " << beta);
  const Shape sa{B, M, K}, sb{B, K, N}, so{B, M, N};
  Tensor a_base = random_nonzero(la.base_shape(sa), dt), b_base = random_nonzero(lb.base_shape(sb), dt);
  Tensor o_base = random_nonzero(lout.base_shape(so), dt);
  Tensor out_cpu = lout.view(o_base.clone(), so);
  kernels::bmm(out_cpu, la.view(a_base, sa), lb.view(b_base, sb), beta);
  Tensor o_gpu = o_base.to(kCUDA);
  if (beta == 0) kernels::fill(o_gpu, std::numeric_limits<double>::quiet_NaN());  // must not be read
  Tensor out_gpu = lout.view(o_gpu, so);
  kernels::bmm(out_gpu, la.view(a_base.to(kCUDA), sa), lb.view(b_base.to(kCUDA), sb), beta);
  const std::vector<double> got = out_gpu.cpu().to_vector<double>(), want = out_cpu.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol.atol + tol.rtol * std::abs(want[i])))
      FAIL("element " << i << ": got " << got[i] << ", expected " << want[i]);
  }
}

}  // namespace

TEST_CASE("cuda kernels: bmm through cuBLAS matches the CPU GEMM", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(21);
  REQUIRE_FALSE(cuda::allow_tf32());
  // float32 without TF32: full float32 products, so only the summation order differs.
  const Tolerance fp32{1e-5, 2e-5};
  for (const Layout* la : {&kContiguous, &kTransposed, &kSliced, &kBroadcast}) {
    for (const Layout* lb : {&kContiguous, &kTransposed, &kBroadcast}) {
      compare_bmm("float32", 3, 33, 47, 29, kFloat32, *la, *lb, kContiguous, 0, fp32);
    }
  }
  for (const Layout* lout : {&kContiguous, &kTransposed, &kSliced}) {
    for (double beta : {0.0, 1.0}) {
      compare_bmm("float32 out", 3, 33, 47, 29, kFloat32, kTransposed, kContiguous, *lout, beta, fp32);
    }
  }
  // Degenerate shapes: single rows, columns, inner dims, batches.
  const std::vector<std::array<int64_t, 4>> edges{
      {1, 1, 5, 1}, {2, 1, 8, 9}, {2, 9, 8, 1}, {4, 6, 1, 5}, {1, 64, 64, 64}};
  for (const auto& [B, M, K, N] : edges) {
    compare_bmm("float32 edge", B, M, K, N, kFloat32, kContiguous, kTransposed, kContiguous, 1, fp32);
    compare_bmm("float32 edge", B, M, K, N, kFloat32, kTransposed, kContiguous, kTransposed, 0, fp32);
  }
  // 16-bit floats multiply in float32 and round once; float64 in float64.
  for (DType dt : {kFloat16, kBFloat16, kFloat64}) {
    for (double beta : {0.0, 1.0}) {
      compare_bmm("", 3, 33, 47, 29, dt, kContiguous, kContiguous, kContiguous, beta, tolerance(dt));
      compare_bmm("", 3, 33, 47, 29, dt, kTransposed, kSliced, kTransposed, beta, tolerance(dt));
    }
  }
  // TF32: inputs rounded to 10-bit mantissas, so a loose tolerance.
  cuda::set_allow_tf32(true);
  try {
    compare_bmm("float32 tf32", 3, 128, 96, 80, kFloat32, kContiguous, kTransposed, kContiguous, 0, {1e-2, 5e-2});
    compare_bmm("float32 tf32", 3, 128, 96, 80, kFloat32, kTransposed, kContiguous, kContiguous, 1, {1e-2, 5e-2});
  } catch (...) {
    cuda::set_allow_tf32(false);
    throw;
  }
  cuda::set_allow_tf32(false);
  // An empty inner dim: zeros (beta 0) or out unchanged (beta 1).
  Tensor a = empty({2, 3, 0}, TensorOptions().device(kCUDA)), b = empty({2, 0, 4}, TensorOptions().device(kCUDA));
  Tensor out = full({2, 3, 4}, 5.0, TensorOptions().device(kCUDA));
  kernels::bmm(out, a, b, 1);
  REQUIRE(out.cpu().to_vector<float>() == std::vector<float>(24, 5.0f));
  kernels::bmm(out, a, b, 0);
  REQUIRE(out.cpu().to_vector<float>() == std::vector<float>(24, 0.0f));
}

namespace {

// Gradients of x * y + exp(x) (summed, or back-propagated from a gradient of ones) on one
// device, brought back to the CPU.
struct Gradients {
  Tensor value, dx, dy;
};
Gradients gradients_on(Device device, const Tensor& x0, const Tensor& y0, bool sum) {
  Tensor x = x0.clone().to(device).requires_grad_(true);
  Tensor y = y0.clone().to(device).requires_grad_(true);
  Tensor z = x * y + x.exp();
  if (sum) {
    z = z.sum();
    z.backward();
  } else {
    z.backward(ones_like(z));
  }
  REQUIRE(x.grad().device() == device);
  return {z.cpu(), x.grad().cpu(), y.grad().cpu()};
}

void compare_gradients(bool sum) {
  manual_seed(31);
  const Tensor x0 = random_nonzero({5, 7}), y0 = random_nonzero({5, 7});
  const Gradients cpu = gradients_on(kCPU, x0, y0, sum), gpu = gradients_on(kCUDA, x0, y0, sum);
  check_close(gpu.value, cpu.value, "value");
  check_close(gpu.dx, cpu.dx, "d/dx = y + exp(x)");
  check_close(gpu.dy, cpu.dy, "d/dy = x");
  // And the CPU against the formulas themselves.
  check_close(cpu.dx, values(y0 + x0.exp()), kFloat32, "dx formula");
  check_close(cpu.dy, values(x0), kFloat32, "dy formula");
}

}  // namespace

TEST_CASE("cuda kernels: autograd through CUDA elementwise ops gives the CPU's gradients", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  compare_gradients(/*sum=*/false);  // elementwise kernels only
}

TEST_CASE("cuda kernels: autograd of (x * y + exp(x)).sum() on CUDA gives the CPU's gradients", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  compare_gradients(/*sum=*/true);  // needs the CUDA reduction too
}
