// scaled_dot_product_attention on a GPU, each fused tier forced in turn (Note [attention
// tiers] in kernels/attention/attention_backend.h): cuDNN's graphs (kernels/cuda/cudnn_attention.cpp)
// and Loom's kernels (kernels/cuda/attention.cu), against the composition of ops
// (detail::sdpa_reference) run on the CPU in float64 from the same rounded inputs: the output,
// the logsumexp and the gradients of q, k and v, over odd shapes (L != S, partial tiles,
// Ev != E, head dims at cuDNN's limits), MultiheadAttention's head views, bool and additive
// masks of each broadcast shape (key padding from lengths, a suffix mask or not), causal
// (L < S and L > S) and rows with every key masked; the entry points write exactly their
// outputs (sentinels around them, NaN inside); dropout (Loom's kernel: the CPU's keep bits;
// cuDNN: its own bits, by keep rate, scaling and the backward agreeing with the forward);
// the forced-tier scope; the plan cache in a steady state. "[.cuda]": skipped without a GPU.
#include "catch2_compat.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "attention_test_util.h"
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "cuda_test_util.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/cudnn_attention_plan.h"
#include "loom.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;
using kernels::SDPBackend;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr SDPBackend kCudnn = SDPBackend::CUDNN_ATTENTION, kFlash = SDPBackend::FLASH_ATTENTION;

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
  const std::vector<double> g = got.to(kCPU, kFloat64).to_vector<double>(), w = want.to(kCPU, kFloat64).to_vector<double>();
  double scale = 0;
  for (double x : w)
    if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
  size_t bad = g.size();
  for (size_t i = 0; i < g.size() && bad == g.size(); ++i) {
    const bool same_inf = std::isinf(w[i]) && g[i] == w[i];
    if (!same_inf && !(std::abs(g[i] - w[i]) <= tol.atol * scale + tol.rtol * std::abs(w[i]))) bad = i;  // NaN fails
  }
  if (bad == g.size()) return;
  FAIL(what << " element " << bad << ": got " << g[bad] << ", expected " << w[bad] << " (largest |expected| "
            << scale << ")");
}

// A step's output and gradients against the reference's, the output to out_tol.
void expect_step_near(const SdpaGrads& got, const SdpaGrads& ref, Tol tol, Tol out_tol) {
  expect_near(got.out, ref.out, out_tol, "out");
  expect_near(got.dq, ref.dq, tol, "dq");
  expect_near(got.dk, ref.dk, tol, "dk");
  expect_near(got.dv, ref.dv, tol, "dv");
}

// The name of the fused node out's history runs through (below the views that reshape it),
// "" for the composition.
std::string fused_node(const Tensor& out) {
  std::vector<std::shared_ptr<Node>> todo{out.grad_fn()};
  while (!todo.empty()) {
    const std::shared_ptr<Node> node = todo.back();
    todo.pop_back();
    if (!node) continue;
    if (node->name().find("ScaledDotProduct") == 0) return node->name();
    for (const Edge& e : node->next_edges()) todo.push_back(e.fn);
  }
  return "";
}

std::string node_of(SDPBackend tier) {
  return tier == kCudnn ? "ScaledDotProductCudnnAttentionBackward" : "ScaledDotProductAttentionBackward";
}

enum class Mask { None, BoolLS, BoolPadding, KeyLengths, BoolFull, AdditiveLS, AdditiveFull, Causal };

struct Case {
  Shape batch;  // q's leading dims, shared by k and v
  int64_t L, S, E, Ev;
  Mask mask;
  bool dead_row = false;  // query row L / 2 sees no key (KeyLengths: batch entry 0 keeps no key)
  bool heads = false;     // q, k, v are MultiheadAttention's head views of (B, rows, H·cols) projections

  // (batch..., rows, cols)
  Shape dims(int64_t rows, int64_t cols) const {
    Shape s = batch;
    s.insert(s.end(), {rows, cols});
    return s;
  }
  std::string name(DType dtype, SDPBackend tier) const {
    std::ostringstream os;
    os << kernels::sdp_backend_name(tier) << ", " << dtype_name(dtype) << ", q " << shape_str(dims(L, E)) << ", k "
       << shape_str(dims(S, E)) << ", v " << shape_str(dims(S, Ev)) << ", mask kind " << int(mask)
       << (dead_row ? ", dead rows" : "") << (heads ? ", head views" : "");
    return os.str();
  }
};

// The case's mask on the CPU, or undefined (None, Causal): which keys each query keeps is
// drawn at (batch..., L, S), key 0 always kept but for the dead row, then cut down to the
// mask's own broadcast shape: bool, or additive in dtype (-inf where a key is dropped).
// KeyLengths: (B, 1, 1, S) true for keys below a length per batch entry (a suffix mask,
// as the encoder makes from lengths; length 0 for entry 0 with dead_row).
Tensor cpu_mask(const Case& c, DType dtype) {
  if (c.mask == Mask::None || c.mask == Mask::Causal) return Tensor();
  const int64_t lead = int64_t(c.batch.size());
  if (c.mask == Mask::KeyLengths) {
    Tensor lengths = randint(1, c.S + 1, {c.batch[0]});
    lengths.narrow(0, c.batch[0] - 1, 1).fill_(c.S);
    if (c.dead_row) lengths.narrow(0, 0, 1).fill_(0);
    Shape shape{c.batch[0]};
    for (int64_t d = 1; d < lead; ++d) shape.push_back(1);
    shape.insert(shape.end(), {1, c.S});
    return arange(c.S).reshape({1, c.S}).lt(lengths.reshape({c.batch[0], 1})).reshape(shape);
  }
  Tensor keep = rand(c.dims(c.L, c.S)).lt(0.75);
  keep.narrow(-1, 0, 1).fill_(true);
  if (c.dead_row) keep.narrow(-2, c.L / 2, 1).fill_(false);
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

// An operand of shape (batch..., rows, cols) on the GPU; with c.heads the (B, H, rows, cols)
// heads of a (B, rows, H·cols) projection, read in place.
Tensor gpu_operand(const Case& c, const Tensor& values) {
  if (!c.heads) return values.to(kCUDA);
  const int64_t B = values.size(0), H = values.size(1), rows = values.size(2), cols = values.size(3);
  return values.transpose(1, 2).contiguous().to(kCUDA).view({B, rows, H, cols}).transpose(1, 2);
}

// The tier forced by a scope against the composition in float64 on the CPU, or for Loom's
// kernel with dropout_p against the CPU's fused float64 kernel with dropout: both calls
// seeded alike draw the same keep bits (Note [attention dropout]).
void check_against_reference(const Case& c, DType dtype, SDPBackend tier, double dropout_p = 0) {
  INFO(c.name(dtype, tier) << ", dropout_p " << dropout_p);
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
                                       REQUIRE(fused_node(out) == node_of(kFlash));  // the CPU kernel's
                                       return out;
                                     });
  const Tensor gpu_mask = mask.defined() ? mask.to(kCUDA) : mask;
  seed_dropout();
  kernels::SdpaKernelGuard only(tier);
  const SdpaGrads got = sdpa_grads(gpu_operand(c, q), gpu_operand(c, k), gpu_operand(c, v), gy.to(kCUDA),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       Tensor out =
                                           F::scaled_dot_product_attention(a, b, d, gpu_mask, dropout_p, causal);
                                       REQUIRE(out.is_cuda());
                                       REQUIRE(out.dtype() == dtype);
                                       REQUIRE(fused_node(out) == node_of(tier));
                                       if (c.heads) CHECK(out.transpose(1, 2).is_contiguous());  // (B, L, H, Ev)
                                       return out;
                                     });
  const Tol tol = tolerance_of(dtype);
  expect_step_near(got, ref, tol, dtype == kFloat32 ? Tol{1e-5, 1e-5} : tol);
  if (c.dead_row && c.mask != Mask::KeyLengths) {  // weights 0, as PyTorch 2.x gives: output and dq 0 exactly
    CHECK(got.out.select(-2, c.L / 2).abs().max().item<double>() == 0);
    CHECK(got.dq.select(-2, c.L / 2).abs().max().item<double>() == 0);
  }
  if (c.dead_row && c.mask == Mask::KeyLengths) {  // batch entry 0 keeps no key
    CHECK(got.out.select(0, 0).abs().max().item<double>() == 0);
    CHECK(got.dq.select(0, 0).abs().max().item<double>() == 0);
  }
}

// The cases both tiers take: head dims multiples of 8 and masks whose rows are 16 bytes
// apart (cuDNN's rules, Note [cuDNN attention plans]), 16-bit; Loom's kernel runs them too.
const std::vector<Case>& shared_cases() {
  static const std::vector<Case> cases = {
      {{2, 3}, 5, 8, 8, 16, Mask::None},                        // one partial tile of everything
      {{2, 2}, 37, 136, 8, 16, Mask::BoolFull, true},           // three key tiles, the last partial
      {{2, 2}, 70, 48, 64, 64, Mask::Causal},                   // L > S: late rows see every key
      {{1, 3}, 45, 128, 64, 32, Mask::BoolPadding},             // (B, 1, 1, S), stride 0 over H and L
      {{3, 2}, 40, 64, 64, 64, Mask::KeyLengths, false, true},  // the encoder's masks from lengths, heads
      {{3, 2}, 33, 56, 32, 32, Mask::KeyLengths, true},         // a batch entry with no key
      {{2, 1}, 9, 16, 128, 128, Mask::AdditiveLS, true},        // (L, S) broadcast over the batch
      {{1, 2}, 65, 128, 128, 96, Mask::Causal},                 // L < S, E != Ev
      {{3}, 33, 40, 96, 72, Mask::AdditiveFull},                // 3-D (N, L, E)
      {{}, 17, 64, 8, 24, Mask::BoolLS, true},                  // 2-D (L, E)
      {{2, 2}, 128, 128, 32, 32, Mask::Causal, false, true},    // whole tiles, head views
      {{2, 4}, 64, 64, 64, 64, Mask::BoolPadding, false, true}, // a padding mask on head views
  };
  return cases;
}

}  // namespace

TEST_CASE("cuda sdpa: cuDNN's graphs match the composition of ops", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(21);
  for (DType dtype : {kFloat16, kBFloat16})
    for (const Case& c : shared_cases()) check_against_reference(c, dtype, kCudnn);
  // Head dims at cuDNN's limits: 8, and 256 on Hopper, which Loom's kernel does not take.
  check_against_reference({{2, 2}, 40, 48, 256, 256, Mask::Causal}, kBFloat16, kCudnn);
  check_against_reference({{2, 2}, 40, 48, 256, 128, Mask::None, false, true}, kFloat16, kCudnn);
  check_against_reference({{2, 2}, 40, 48, 8, 8, Mask::KeyLengths}, kBFloat16, kCudnn);
}

TEST_CASE("cuda sdpa: Loom's fused kernels match the composition of ops", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(21);
  // What only Loom's kernel takes: float32, head dims no multiple of 8, masks of any stride.
  const std::vector<Case> own = {
      {{2, 3}, 5, 7, 1, 3, Mask::None},                  // E = 1
      {{2, 2}, 37, 133, 8, 9, Mask::BoolFull, true},     // S and Ev no multiple of 8
      {{1, 3}, 45, 130, 64, 32, Mask::BoolPadding},      // a padding mask of S 130
      {{1, 2}, 65, 129, 128, 100, Mask::Causal},         // L < S, E != Ev, both near 128
      {{3}, 33, 33, 100, 70, Mask::AdditiveFull},        // 3-D
      {{1, 1}, 200, 3, 33, 1, Mask::None},               // few keys, Ev = 1
      {{2, 2}, 21, 65, 3, 5, Mask::BoolPadding, false, true},
  };
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    for (const Case& c : own) check_against_reference(c, dtype, kFlash);
    for (const Case& c : shared_cases()) check_against_reference(c, dtype, kFlash);
  }
}

// The entry points against the float64 composition's own logsumexp, and writing their
// outputs only (sentinels around them, NaN inside), for each tier.
TEST_CASE("cuda sdpa: each tier's entry points write their outputs and the logsumexp, nothing around them", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(22);
  const int64_t N = 3, L = 70, S = 56, E = 40, Ev = 24, pad = 64;
  const double sentinel = 4096.0;  // exact in every dtype
  for (auto [tier, dtype] : {std::pair{kFlash, kFloat32}, std::pair{kFlash, kBFloat16}, std::pair{kCudnn, kBFloat16},
                             std::pair{kCudnn, kFloat16}}) {
    INFO(kernels::sdp_backend_name(tier) << " " << dtype_name(dtype));
    const bool cudnn = tier == kCudnn;
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
    const Tensor q = random_nonzero({N, L, E}, dtype), k = random_nonzero({N, S, E}, dtype),
                 v = random_nonzero({N, S, Ev}, dtype), gy = random_nonzero({N, L, Ev}, dtype);
    Tensor bias = random_nonzero({N, 1, S}, dtype);  // stride 0 over L; row L / 3 of entry 1 sees no key
    const Tensor bias_full = bias.expand({N, L, S}).contiguous();
    bias_full.select(0, 1).select(0, L / 3).fill_(-kInf);
    const Tensor gpu_bias = bias_full.to(kCUDA);
    const auto out = guarded(L, Ev, dtype), lse = guarded(1, L, kFloat32);
    const auto forward = cudnn ? &kernels::cudnn_attention_forward : &kernels::attention_forward;
    const auto backward = cudnn ? &kernels::cudnn_attention_backward : &kernels::attention_backward;
    REQUIRE(kernels::attention_refusal(tier, q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), gpu_bias, false, 0, true) == "");
    forward(out.second, lse.second.view({N, L}), q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), gpu_bias, false, 0.3, {});
    check_guarded(out, "out");
    check_guarded(lse, "lse");
    // The logsumexp of each row's scaled, masked scores (+inf for the row with no key).
    const Tensor scores = q.to(kFloat64).matmul(k.to(kFloat64).transpose(1, 2)) * 0.3 + bias_full.to(kFloat64);
    const Tensor lse_ref = scores.logsumexp({2}).masked_fill(scores.max(2).first.eq(-kInf), kInf);
    expect_near(lse.second.view({N, L}), lse_ref, {1e-5, 1e-4}, "lse");
    const auto dq = guarded(L, E, dtype), dk = guarded(S, E, dtype), dv = guarded(S, Ev, dtype);
    backward(dq.second, dk.second, dv.second, gy.to(kCUDA), q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), out.second,
             lse.second.view({N, L}), gpu_bias, false, 0.3, {});
    check_guarded(dq, "dq");
    check_guarded(dk, "dk");
    check_guarded(dv, "dv");
    // The composition's numbers, in float64 on the CPU.
    const SdpaGrads ref = sdpa_grads(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), gy.to(kFloat64),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       return F::detail::sdpa_reference(a, b, d, bias_full.to(kFloat64), 0.0, false,
                                                                        0.3);
                                     });
    expect_step_near({out.second, dq.second, dk.second, dv.second}, ref, tolerance_of(dtype), tolerance_of(dtype));
  }
}

TEST_CASE("cuda sdpa: each call runs on the first tier that takes it, and a scope forces one", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(23);
  auto on_gpu = [](const Shape& s, DType dt) { return random_nonzero(s, dt).to(kCUDA).requires_grad_(true); };
  auto tier_of = [&](int64_t E, int64_t Ev, DType dtype) {
    return fused_node(F::scaled_dot_product_attention(on_gpu({2, 4, 33, E}, dtype), on_gpu({2, 4, 40, E}, dtype),
                                                      on_gpu({2, 4, 40, Ev}, dtype)));
  };
  CHECK(tier_of(64, 64, kBFloat16) == node_of(kCudnn));
  CHECK(tier_of(256, 256, kFloat16) == node_of(kCudnn));   // beyond Loom's kernel
  CHECK(tier_of(64, 64, kFloat32) == node_of(kFlash));    // cuDNN: 16-bit only
  CHECK(tier_of(12, 12, kBFloat16) == node_of(kFlash));   // cuDNN: multiples of 8
  CHECK(tier_of(136, 8, kFloat32).empty());               // neither: the composition
  CHECK(tier_of(16, 16, kFloat64).empty());
  {
    kernels::SdpaKernelGuard flash(kFlash);
    CHECK(tier_of(64, 64, kBFloat16) == node_of(kFlash));
    require_throws_with<NotImplementedError>([&] { tier_of(256, 256, kBFloat16); },
                                             {"no available kernel", "FLASH_ATTENTION", "head dims up to 128"});
  }
  {
    kernels::SdpaKernelGuard cudnn(kCudnn);
    require_throws_with<NotImplementedError>([&] { tier_of(64, 64, kFloat32); },
                                             {"CUDNN_ATTENTION", "float16 and bfloat16"});
  }
  {
    kernels::SdpaKernelGuard math(SDPBackend::MATH);
    CHECK(tier_of(64, 64, kBFloat16).empty());
  }
  // E = 136 float32 and float64 give the composition's numbers.
  for (auto [E, dtype] : {std::pair{int64_t(136), kFloat32}, std::pair{int64_t(16), kFloat64}}) {
    INFO("E " << E << " " << dtype_name(dtype));
    const Tensor q = random_nonzero({2, 6, E}, dtype), k = random_nonzero({2, 9, E}, dtype),
                 v = random_nonzero({2, 9, 5}, dtype), gy = random_nonzero({2, 6, 5}, dtype);
    const SdpaGrads got = sdpa_grads(q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), gy.to(kCUDA),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       Tensor out = F::scaled_dot_product_attention(a, b, d);
                                       CHECK(fused_node(out).empty());
                                       return out;
                                     });
    const SdpaGrads ref = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
      return F::detail::sdpa_reference(a, b, d, Tensor(), 0.0, false, std::nullopt);
    });
    expect_near(got.out, ref.out, {1e-5, 1e-5}, "out");
    expect_near(got.dq, ref.dq, {1e-5, 1e-4}, "dq");
  }
}

// A training step whose shapes repeat builds its graphs once (Note [cuDNN attention plans]).
TEST_CASE("cuda sdpa: a steady-state step builds no cuDNN graph", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(28);
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(128, 2).batch_first(true).dropout(0.1));
  mha->to(kCUDA);
  const Tensor lengths = tensor<int64_t>({40, 17, 64, 3}).to(kCUDA);
  const Tensor padding = arange(64).to(kCUDA).reshape({1, 64}).ge(lengths.reshape({4, 1}));  // (B, S)
  auto step = [&] {
    amp::AutocastGuard autocast(kCUDA, kBFloat16);
    const Tensor x = randn({4, 64, 128}).to(kCUDA);
    const Tensor out = mha(x, x, x, padding, /*need_weights=*/false).output;
    CHECK(fused_node(out) == node_of(kCudnn));
    out.to(kFloat32).pow(2).mean().backward();
  };
  const size_t before = kernels::cudnn_attention_graphs_built();
  step();
  const size_t first = kernels::cudnn_attention_graphs_built();
  CHECK(first - before == 2);  // the forward and the backward
  for (int i = 0; i < 3; ++i) step();
  CHECK(kernels::cudnn_attention_graphs_built() == first);
}

// Loom's kernel draws the CPU kernel's keep bits for the same (seed, offset): the CPU's
// fused float64 kernel with dropout, seeded alike, on the same rounded inputs is the
// reference for the output and the gradients.
TEST_CASE("cuda sdpa: Loom's kernel's dropout matches the CPU kernel's at the same seed", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(25);
  const std::vector<std::pair<Case, double>> cases = {
      {{{2, 2}, 37, 133, 8, 9, Mask::BoolFull, true}, 0.3},  // three key tiles, the last partial
      {{{2, 2}, 70, 45, 64, 64, Mask::Causal}, 0.2},         // L > S, S no multiple of 4
      {{{1, 3}, 45, 130, 64, 32, Mask::BoolPadding}, 0.5},
      {{{1, 2}, 65, 129, 128, 100, Mask::Causal}, 0.1},      // L < S, E != Ev near 128
      {{{3}, 33, 33, 100, 70, Mask::AdditiveFull}, 0.4},
      {{{2, 2}, 40, 64, 32, 32, Mask::None, false, true}, 0.25},  // head views
  };
  for (DType dtype : {kFloat32, kFloat16, kBFloat16})
    for (const auto& [c, p] : cases) check_against_reference(c, dtype, kFlash, p);
}

// With q = 0 every weight is 1 / S, and with v the identity out (N, L, S) is
// keep / (S (1 - p)): Loom's kernel drops exactly the weights detail::sdpa_dropout_mask
// names, across query tiles.
TEST_CASE("cuda sdpa: Loom's kernel drops the weights of the CPU's mask bit for bit", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(27);
  const int64_t N = 3, L = 130, S = 101;
  const double p = 0.3;
  kernels::SdpaKernelGuard flash(kFlash);
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

// cuDNN draws its own bits from the (seed, offset) Loom's generator gives it. With q = 0
// and v the identity, out (B, H, L, S) = keep / (S (1 - p)): the kept weights are scaled by
// exactly 1 / (1 - p), about 1 - p of them are kept, and a second call at the same seed
// keeps the same ones (the generator's offset decides, as for the other tiers). Then the
// backward: a step on random q, k, v at that seed matches the composition dropping the
// weights by the mask read off the first call, so the backward drops the forward's weights.
TEST_CASE("cuda sdpa: cuDNN's dropout keeps 1 - p of the weights, scaled, the same in the backward", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const int64_t B = 2, H = 2, L = 96, S = 128, E = 64;
  const double p = 0.25;
  kernels::SdpaKernelGuard cudnn(kCudnn);
  for (DType dtype : {kBFloat16, kFloat16}) {
    INFO(dtype_name(dtype));
    auto keep_of_call = [&](uint64_t seed) {  // (B, H, L, S) bool
      manual_seed(seed);
      const Tensor q = zeros({B, H, L, E}, dtype).to(kCUDA), k = random_nonzero({B, H, S, E}, dtype).to(kCUDA);
      const Tensor v = arange(S).unsqueeze(1).eq(arange(S)).to(dtype).expand({B, H, S, S}).contiguous().to(kCUDA);
      const Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), p).to(kCPU, kFloat64);
      const Tensor kept = out.ne(0);
      // Every kept weight is 1 / (S (1 - p)) (to the dtype's rounding).
      const double weight = 1.0 / (double(S) * (1 - p));
      expect_near(out.masked_fill(kept.logical_not(), weight), full(out.sizes(), weight, kFloat64),
                  tolerance_of(dtype), "kept weights");
      return kept;
    };
    const Tensor keep = keep_of_call(29);
    const double rate = keep.to(kFloat64).mean().item<double>();
    const double n = double(keep.numel()), sd = std::sqrt(p * (1 - p) / n);
    CHECK(std::abs(rate - (1 - p)) < 6 * sd);  // 6 standard deviations: 1 in 10^9 to fail by chance
    CHECK(keep_of_call(29).eq(keep).all().item<bool>());    // the same (seed, offset): the same bits
    CHECK_FALSE(keep_of_call(30).eq(keep).all().item<bool>());
    // Rows differ from each other (the bits are no one row's repeated).
    CHECK_FALSE(keep.select(2, 0).eq(keep.select(2, 1)).all().item<bool>());

    // The backward drops what the forward dropped: the composition on the recovered mask.
    const Tensor q = random_nonzero({B, H, L, E}, dtype), k = random_nonzero({B, H, S, E}, dtype);
    const Tensor v = random_nonzero({B, H, S, S}, dtype), gy = random_nonzero({B, H, L, S}, dtype);
    manual_seed(29);
    const SdpaGrads got = sdpa_grads(q.to(kCUDA), k.to(kCUDA), v.to(kCUDA), gy.to(kCUDA),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       Tensor out = F::scaled_dot_product_attention(a, b, d, Tensor(), p);
                                       REQUIRE(fused_node(out) == node_of(kCudnn));
                                       return out;
                                     });
    const SdpaGrads ref = sdpa_grads(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), gy.to(kFloat64),
                                     [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                                       return F::detail::sdpa_reference(a, b, d, Tensor(), p, false, std::nullopt,
                                                                        keep);
                                     });
    expect_step_near(got, ref, tolerance_of(dtype), tolerance_of(dtype));
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
  CHECK(fused_node(out) == node_of(kCudnn));
  expect_near(out, expected.to(kCPU), {2e-2, 2e-2}, "float16 out (from float16-rounded inputs)");
  out.sum().backward();
  CHECK(qg.grad().dtype() == kFloat32);
}
