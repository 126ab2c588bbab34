// The fused CUDA attention kernels (kernels/cuda/attention.cu) through
// nn::functional::scaled_dot_product_attention, against the composition of ops
// (detail::sdpa_reference) run on the CPU in float64 from the same rounded inputs: the
// output and the gradients of q, k and v in float32, float16 and bfloat16, over odd shapes
// (L != S, partial tiles, E from 1 to 128, Ev != E), bool and additive masks broadcast as
// padding masks, causal (L < S and L > S) and rows with every key masked. Also: the kernel
// entry points write exactly their outputs (sentinels around them, NaN inside), which
// calls the dispatch leaves to the composition on a GPU, and dropout drawn inside the kernels
// with the CPU kernel's keep bits (Note [attention dropout]). "[.cuda]": skipped without a GPU.
#include "catch2_compat.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "cuda_test_util.h"
#include "kernels/attention.h"
#include "loom.h"
#include "attention_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// |got - want| <= atol * max|want| + rtol * |want| elementwise: the 16-bit gradients are
// sums of many rounded products, so their error scales with the largest of them.
struct Tol {
  double atol, rtol;
};

Tol tolerance_of(DType dtype) {
  if (dtype == kFloat32) return {1e-5, 1e-4};
  if (dtype == kFloat16) return {5e-3, 5e-3};
  return {3e-2, 3e-2};  // bfloat16
}

void expect_near(const Tensor& got, const Tensor& want, Tol tol, const std::string& what) {
  INFO(what << ": shapes " << shape_str(got.sizes()) << " and " << shape_str(want.sizes()));
  REQUIRE(got.sizes() == want.sizes());
  const std::vector<double> g = got.to(kCPU, kFloat64).to_vector<double>(), w = want.to(kFloat64).to_vector<double>();
  double scale = 0;
  for (double x : w) scale = std::max(scale, std::abs(x));
  size_t bad = g.size();
  for (size_t i = 0; i < g.size() && bad == g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= tol.atol * scale + tol.rtol * std::abs(w[i]))) bad = i;  // NaN fails too
  if (bad == g.size()) return;
  FAIL(what << " element " << bad << ": got " << g[bad] << ", expected " << w[bad] << " (largest |expected| "
            << scale << ")");
}

// Whether `out`'s graph holds the fused node (below the views that reshape it).
bool through_fused_node(const Tensor& out) {
  std::vector<std::shared_ptr<Node>> todo{out.grad_fn()};
  while (!todo.empty()) {
    const std::shared_ptr<Node> node = todo.back();
    todo.pop_back();
    if (!node) continue;
    if (node->name() == "ScaledDotProductAttentionBackward") return true;
    for (const Edge& e : node->next_edges()) todo.push_back(e.fn);
  }
  return false;
}

enum class Mask { None, BoolLS, BoolPadding, BoolFull, AdditiveLS, AdditiveFull, Causal };

struct Case {
  Shape batch;  // q's leading dims, shared by k and v
  int64_t L, S, E, Ev;
  Mask mask;
  bool dead_row = false;  // query row L / 2 sees no key

  // (batch..., rows, cols)
  Shape dims(int64_t rows, int64_t cols) const {
    Shape s = batch;
    s.insert(s.end(), {rows, cols});
    return s;
  }
  std::string name(DType dtype) const {
    std::ostringstream os;
    os << dtype_name(dtype) << ", q " << shape_str(dims(L, E)) << ", k " << shape_str(dims(S, E)) << ", v "
       << shape_str(dims(S, Ev)) << ", mask kind " << int(mask) << (dead_row ? ", row L / 2 masked" : "");
    return os.str();
  }
};

// The case's mask on the CPU, or undefined (None, Causal): which keys each query keeps is
// drawn at (batch..., L, S), key 0 always kept but for the dead row, then cut down to the
// mask's own broadcast shape: bool, or additive in dtype (-inf where a key is dropped).
Tensor cpu_mask(const Case& c, DType dtype) {
  if (c.mask == Mask::None || c.mask == Mask::Causal) return Tensor();
  Tensor keep = rand(c.dims(c.L, c.S)).lt(0.75);
  keep.narrow(-1, 0, 1).fill_(true);
  if (c.dead_row) keep.narrow(-2, c.L / 2, 1).fill_(false);
  const int64_t lead = int64_t(c.batch.size());
  if (c.mask == Mask::BoolLS || c.mask == Mask::AdditiveLS) {  // (L, S): the first batch entry's
    for (int64_t d = 0; d < lead; ++d) keep = keep.select(0, 0);
  } else if (c.mask == Mask::BoolPadding) {  // (B, 1, 1, S): the first head's first query row
    keep = keep.narrow(-2, 0, 1);
    for (int64_t d = 1; d < lead; ++d) keep = keep.narrow(d, 0, 1);
  }
  keep = keep.contiguous();
  if (c.mask == Mask::AdditiveLS || c.mask == Mask::AdditiveFull)
    return random_nonzero(keep.sizes(), dtype, -1.0, 1.0).masked_fill(keep.logical_not(), -kInf);
  return keep;
}


// The fused CUDA kernels against the composition in float64 on the CPU, or with dropout_p
// against the CPU's fused float64 kernel with dropout: both calls seeded alike draw the same
// keep bits (Note [attention dropout]).
void check_against_reference(const Case& c, DType dtype, double dropout_p = 0) {
  INFO(c.name(dtype) << ", dropout_p " << dropout_p);
  auto seed_dropout = [&] {
    if (dropout_p > 0) manual_seed(26);
  };
  // Inputs rounded to dtype once: the reference sees exactly what the kernel sees.
  const Tensor q = random_nonzero(c.dims(c.L, c.E), dtype), k = random_nonzero(c.dims(c.S, c.E), dtype);
  const Tensor v = random_nonzero(c.dims(c.S, c.Ev), dtype), gy = random_nonzero(c.dims(c.L, c.Ev), dtype);
  const Tensor mask = cpu_mask(c, dtype);
  const Tensor mask64 = mask.defined() && mask.dtype() != kBool ? mask.to(kFloat64) : mask;
  const bool causal = c.mask == Mask::Causal;
  seed_dropout();
  const SdpaGrads ref = sdpa_grads(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), gy.to(kFloat64),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       if (dropout_p == 0)
                                         return F::detail::sdpa_reference(a, b, d, mask64, 0.0, causal, std::nullopt);
                                       Tensor out = F::scaled_dot_product_attention(a, b, d, mask64, dropout_p, causal);
                                       REQUIRE(through_fused_node(out));  // the CPU kernel's
                                       return out;
                                     });
  const Tensor gpu_mask = mask.defined() ? mask.to(kCUDA) : mask;
  seed_dropout();
  const SdpaGrads got = sdpa_grads(q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), gy.to(kCUDA),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       Tensor out =
                                           F::scaled_dot_product_attention(a, b, d, gpu_mask, dropout_p, causal);
                                       REQUIRE(out.is_cuda());
                                       REQUIRE(out.dtype() == dtype);
                                       REQUIRE(through_fused_node(out));
                                       return out;
                                     });
  const Tol tol = tolerance_of(dtype);
  expect_near(got.out, ref.out, dtype == kFloat32 ? Tol{1e-5, 1e-5} : tol, "out");
  expect_near(got.dq, ref.dq, tol, "dq");
  expect_near(got.dk, ref.dk, tol, "dk");
  expect_near(got.dv, ref.dv, tol, "dv");
  if (c.dead_row) {  // weights 0, as the CPU kernel and PyTorch 2.x give: output and dq 0 exactly
    CHECK(got.out.select(-2, c.L / 2).abs().max().item<double>() == 0);
    CHECK(got.dq.select(-2, c.L / 2).abs().max().item<double>() == 0);
  }
}

}  // namespace

TEST_CASE("cuda sdpa: the fused kernels match the composition of ops", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(21);
  const std::vector<Case> cases = {
      {{2, 3}, 5, 7, 1, 3, Mask::None},                  // E = 1: one partial tile of everything
      {{2, 2}, 37, 133, 8, 9, Mask::BoolFull, true},     // three key tiles, the last partial
      {{2, 2}, 70, 45, 64, 64, Mask::Causal},            // L > S: late rows see every key
      {{1, 3}, 45, 130, 64, 32, Mask::BoolPadding},      // (B, 1, 1, S) padding mask, stride 0 over H and L
      {{2, 1}, 9, 11, 128, 128, Mask::AdditiveLS, true}, // (L, S) broadcast over the batch
      {{1, 2}, 65, 129, 128, 100, Mask::Causal},         // L < S, E != Ev, both near 128
      {{3}, 33, 33, 100, 70, Mask::AdditiveFull},        // 3-D (N, L, E)
      {{}, 17, 66, 8, 20, Mask::BoolLS, true},           // 2-D (L, E)
      {{2, 2}, 128, 128, 32, 32, Mask::Causal},          // whole tiles only
      {{1, 1}, 200, 3, 33, 1, Mask::None},               // few keys, Ev = 1
  };
  for (DType dtype : {kFloat32, kFloat16, kBFloat16})
    for (const Case& c : cases) check_against_reference(c, dtype);
}

TEST_CASE("cuda sdpa: the kernel entry points write their outputs and nothing around them", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(22);
  const int64_t N = 3, L = 70, S = 50, E = 40, Ev = 24, pad = 64;
  const double sentinel = 4096.0;  // exact in every dtype
  for (DType dtype : {kFloat32, kBFloat16}) {
    INFO(dtype_name(dtype));
    // A contiguous (N, rows, cols) view in the middle of a buffer: NaN inside, sentinels around.
    auto guarded = [&](int64_t rows, int64_t cols, DType dt) {
      Tensor buffer = full({N * rows * cols + 2 * pad}, sentinel, TensorOptions(dt).device(kCUDA));
      Tensor inside = buffer.narrow(0, pad, N * rows * cols).view({N, rows, cols});
      inside.fill_(std::numeric_limits<double>::quiet_NaN());
      return std::pair{buffer, inside};
    };
    auto check_guarded = [&](const std::pair<Tensor, Tensor>& t, const char* what) {
      INFO(what);
      const Tensor buffer = t.first.to(kCPU, kFloat64);
      CHECK(buffer.narrow(0, 0, pad).eq(sentinel).all().item<bool>());
      CHECK(buffer.narrow(0, buffer.size(0) - pad, pad).eq(sentinel).all().item<bool>());
      CHECK_FALSE(t.second.isnan().any().item<bool>());
    };
    const Tensor q = random_nonzero({N, L, E}, dtype).to(kCUDA), k = random_nonzero({N, S, E}, dtype).to(kCUDA),
                 v = random_nonzero({N, S, Ev}, dtype).to(kCUDA), gy = random_nonzero({N, L, Ev}, dtype).to(kCUDA);
    const Tensor bias = random_nonzero({N, 1, S}, dtype).to(kCUDA).expand({N, L, S});  // stride 0 over L
    const auto out = guarded(L, Ev, dtype), lse = guarded(1, L, kFloat32);
    kernels::attention_forward(out.second, lse.second.view({N, L}), q, k, v, bias, false, 0.3);
    check_guarded(out, "out");
    check_guarded(lse, "lse");
    const auto dq = guarded(L, E, dtype), dk = guarded(S, E, dtype), dv = guarded(S, Ev, dtype);
    kernels::attention_backward(dq.second, dk.second, dv.second, gy, q, k, v, out.second, lse.second.view({N, L}),
                                bias, false, 0.3);
    check_guarded(dq, "dq");
    check_guarded(dk, "dk");
    check_guarded(dv, "dv");
    // The same numbers as through the op (whose bias is this one, made additive).
    const SdpaGrads op = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
      return F::scaled_dot_product_attention(a, b, d, bias, 0.0, false, 0.3);
    });
    const Tol same{1e-6, 1e-6};
    expect_near(out.second, op.out.to(kCPU), same, "out");
    expect_near(dk.second, op.dk.to(kCPU), same, "dk");
    expect_near(dv.second, op.dv.to(kCPU), same, "dv");
  }
}

TEST_CASE("cuda sdpa: what the fused kernels do not take runs the composition", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(23);
  auto on_gpu = [](const Shape& s, DType dt) { return random_nonzero(s, dt).to(kCUDA); };
  CHECK(kernels::has_attention_kernels(on_gpu({2, 5, 128}, kBFloat16), on_gpu({2, 7, 128}, kBFloat16)));
  CHECK(kernels::has_attention_kernels(on_gpu({2, 5, 8}, kFloat32), on_gpu({2, 7, 100}, kFloat32)));
  CHECK_FALSE(kernels::has_attention_kernels(on_gpu({2, 5, 129}, kFloat32), on_gpu({2, 7, 4}, kFloat32)));
  CHECK_FALSE(kernels::has_attention_kernels(on_gpu({2, 5, 4}, kFloat16), on_gpu({2, 7, 129}, kFloat16)));
  CHECK_FALSE(kernels::has_attention_kernels(on_gpu({2, 5, 8}, kFloat64), on_gpu({2, 7, 8}, kFloat64)));

  // E = 129 and float64 give the composition's numbers.
  for (auto [E, dtype] : {std::pair{int64_t(129), kFloat32}, std::pair{int64_t(16), kFloat64}}) {
    INFO("E " << E << " " << dtype_name(dtype));
    const Tensor q = random_nonzero({2, 6, E}, dtype), k = random_nonzero({2, 9, E}, dtype),
                 v = random_nonzero({2, 9, 5}, dtype), gy = random_nonzero({2, 6, 5}, dtype);
    const SdpaGrads got = sdpa_grads(q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), gy.to(kCUDA),
                                       [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                         Tensor out = F::scaled_dot_product_attention(a, b, d);
                                         CHECK_FALSE(through_fused_node(out));
                                         return out;
                                       });
    const SdpaGrads ref = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
      return F::detail::sdpa_reference(a, b, d, Tensor(), 0.0, false, std::nullopt);
    });
    expect_near(got.out, ref.out, {1e-5, 1e-5}, "out");
    expect_near(got.dq, ref.dq, {1e-5, 1e-4}, "dq");
  }
  // Dropout runs inside the fused kernels (Note [attention dropout]).
  Tensor q = on_gpu({2, 6, 8}, kFloat32).requires_grad_(true);
  CHECK(through_fused_node(F::scaled_dot_product_attention(q, on_gpu({2, 9, 8}, kFloat32),
                                                           on_gpu({2, 9, 4}, kFloat32), Tensor(), 0.5)));
}

// The CUDA kernels draw the CPU kernel's keep bits for the same (seed, offset): the CPU's
// fused float64 kernel with dropout, seeded alike, on the same rounded inputs is the
// reference for the output and the gradients.
TEST_CASE("cuda sdpa: fused dropout matches the CPU kernel's at the same seed", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(25);
  const std::vector<std::pair<Case, double>> cases = {
      {{{2, 2}, 37, 133, 8, 9, Mask::BoolFull, true}, 0.3},  // three key tiles, the last partial
      {{{2, 2}, 70, 45, 64, 64, Mask::Causal}, 0.2},         // L > S, S no multiple of 4
      {{{1, 3}, 45, 130, 64, 32, Mask::BoolPadding}, 0.5},
      {{{1, 2}, 65, 129, 128, 100, Mask::Causal}, 0.1},      // L < S, E != Ev near 128
      {{{3}, 33, 33, 100, 70, Mask::AdditiveFull}, 0.4},
  };
  for (DType dtype : {kFloat32, kFloat16, kBFloat16})
    for (const auto& [c, p] : cases) check_against_reference(c, dtype, p);
}

// With q = 0 every weight is 1 / S, and with v the identity out (N, L, S) is
// keep / (S (1 - p)): the CUDA kernel drops exactly the weights detail::sdpa_dropout_mask
// names, across query tiles.
TEST_CASE("cuda sdpa: fused dropout drops the weights of the CPU's mask bit for bit", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(27);
  const int64_t N = 3, L = 130, S = 101;
  const double p = 0.3;
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    INFO(dtype_name(dtype));
    const Tensor q = zeros({N, L, 8}, dtype).to(kCUDA), k = random_nonzero({N, S, 8}, dtype).to(kCUDA);
    const Tensor v = arange(S).unsqueeze(1).eq(arange(S)).to(dtype).expand({N, S, S}).contiguous().to(kCUDA);
    const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
    const Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), p).to(kCPU, kFloat64);  // (N, L, S)
    const Tensor keep = F::detail::sdpa_dropout_mask(seed, offset, N, L, S, p);
    CHECK(out.ne(0).eq(keep).all().item<bool>());
    expect_near(out, keep.to(kFloat64) / (S * (1 - p)), tolerance_of(dtype), "out");
  }
}

TEST_CASE("cuda sdpa: under CUDA autocast it runs fused in float16", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(24);
  const Tensor q = random_nonzero({2, 4, 33, 64}).to(kCUDA), k = random_nonzero({2, 4, 47, 64}).to(kCUDA),
               v = random_nonzero({2, 4, 47, 64}).to(kCUDA);
  const Tensor expected = F::detail::sdpa_reference(q, k, v, Tensor(), 0.0, true, std::nullopt);
  amp::AutocastGuard autocast(kCUDA);
  Tensor qg = q.detach().requires_grad_(true);
  const Tensor out = F::scaled_dot_product_attention(qg, k, v, Tensor(), 0.0, true);
  CHECK(out.dtype() == kFloat16);
  CHECK(through_fused_node(out));
  expect_near(out, expected.to(kCPU), {2e-2, 2e-2}, "float16 out (from float16-rounded inputs)");
  out.sum().backward();
  CHECK(qg.grad().dtype() == kFloat32);
}
