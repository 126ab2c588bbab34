// nn::functional::scaled_dot_product_attention: the fused CPU kernels against the plain
// composition of ops (detail::sdpa_reference), float64 gradcheck of the fused backward,
// golden values from PyTorch 2.x (tests/golden/make_attention_golden.py), dropout inside the
// fused kernels against the composition on their mask (detail::sdpa_dropout_mask), errors.
#include "catch2_compat.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "loom.h"
#include "attention_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;

namespace {

// |actual - expected| <= atol + rtol |expected| everywhere (NaN nowhere), else the worst element.
void require_close(const Tensor& actual, const Tensor& expected, double atol, double rtol, const std::string& what) {
  INFO(what << ": shapes " << shape_str(actual.sizes()) << " and " << shape_str(expected.sizes()));
  REQUIRE(actual.sizes() == expected.sizes());
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double excess = std::isnan(a[i]) || std::isnan(e[i]) ? INFINITY : std::abs(a[i] - e[i]) - rtol * std::abs(e[i]);
    if (excess > worst) worst = excess, at = i;
  }
  INFO(what << " element " << at << ": got " << a[at] << ", expected " << e[at]);
  CHECK(worst <= atol);
}

// Whether out's history runs through the fused node (below the views that reshape it).
bool ran_fused(const Tensor& out) {
  for (std::shared_ptr<Node> node = out.grad_fn(); node;
       node = node->next_edges().empty() ? nullptr : node->next_edges()[0].fn)
    if (node->name() == "ScaledDotProductAttentionBackward") return true;
  return false;
}

enum class MaskKind { None, BoolLS, BoolB11S, BoolBHLS, FloatLS, FloatBHLS, Causal };

struct Case {
  Shape batch;  // leading dims of q (k and v share them)
  int64_t L, S, E, Ev;
  MaskKind mask;
  bool dead_row = false;  // one query row with every key masked
};

std::string describe(const Case& c) {
  std::ostringstream os;
  os << "batch " << shape_str(c.batch) << " L " << c.L << " S " << c.S << " E " << c.E << " Ev " << c.Ev << " mask "
     << int(c.mask) << (c.dead_row ? " with a dead row" : "");
  return os.str();
}

Shape cat(Shape a, std::initializer_list<int64_t> tail) {
  a.insert(a.end(), tail);
  return a;
}

// The mask of a case (undefined for None and Causal), of the case's broadcast shape.
Tensor make_mask(const Case& c, DType dtype) {
  const int64_t B = c.batch.empty() ? 1 : c.batch[0];
  Shape shape;
  switch (c.mask) {
    case MaskKind::None:
    case MaskKind::Causal: return Tensor();
    case MaskKind::BoolLS:
    case MaskKind::FloatLS: shape = {c.L, c.S}; break;
    case MaskKind::BoolB11S: shape = cat(Shape{B}, {1, 1, c.S}); break;
    case MaskKind::BoolBHLS:
    case MaskKind::FloatBHLS: shape = cat(c.batch, {c.L, c.S}); break;
  }
  Tensor keep = rand(shape).lt(0.7);
  keep.select(-1, 0).fill_(true);  // every row keeps a key...
  if (c.dead_row) keep.select(-2, c.L / 2).fill_(false);  // ...but this one
  const bool is_bool = c.mask == MaskKind::BoolLS || c.mask == MaskKind::BoolB11S || c.mask == MaskKind::BoolBHLS;
  if (is_bool) return keep;
  return random_nonzero(shape, dtype).masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
}


// The fused path against the reference: float32 to 1e-5 (the gradients, sums over L or S
// of products, to 1e-5 plus 1e-4 relative).
void require_close(const SdpaGrads& fused, const SdpaGrads& ref) {
  require_close(fused.out, ref.out, 1e-5, 1e-5, "out");
  require_close(fused.dq, ref.dq, 1e-5, 1e-4, "dq");
  require_close(fused.dk, ref.dk, 1e-5, 1e-4, "dk");
  require_close(fused.dv, ref.dv, 1e-5, 1e-4, "dv");
}

// The generator's Philox stream now: what the next fused call draws its keep bits from.
struct Stream {
  uint64_t seed, offset;
};
Stream stream_now() { return {default_generator().seed(), default_generator().offset()}; }

// The keep mask the fused kernel draws for case c from `stream` (detail::sdpa_dropout_mask,
// Note [attention dropout]), as (batch..., L, S).
Tensor fused_keep_mask(const Case& c, Stream stream, double p) {
  int64_t N = 1;
  for (int64_t d : c.batch) N *= d;
  return F::detail::sdpa_dropout_mask(stream.seed, stream.offset, N, c.L, c.S, p).reshape(cat(c.batch, {c.L, c.S}));
}

// The fused path against the composition for one case in dtype, with dropout_p: float32
// to require_close's tolerances, float64 to 1e-11 plus 1e-10 relative; 16-bit operands
// (Note [16-bit attention on the CPU]: the fused kernel runs them in float32) against the
// float32 composition on the same values, to 2 ulps of the dtype (the outputs' one
// rounding, and the backward reading the rounded output). With dropout the composition
// drops the weights by the fused call's own keep mask.
// head_views: q, k and v of (B, H, rows, cols) are the heads of (B, rows, H·cols + 3)
// projections (narrowed, viewed, transposed: MultiheadAttention's layout), which the CPU
// kernel reads in place (Note [attention head layouts]).
void check_fused_matches_reference(const Case& c, DType dtype = kFloat32, double dropout_p = 0,
                                   bool head_views = false) {
  INFO(describe(c) << " in " << dtype_name(dtype) << ", dropout_p " << dropout_p << (head_views ? ", head views" : ""));
  auto make = [&](const Shape& s) {
    if (!head_views) return random_nonzero(s).to(dtype);
    const int64_t B = s[0], H = s[1], rows = s[2], cols = s[3];
    const Tensor projection = random_nonzero({B, rows, H * cols + 3}).to(dtype).narrow(2, 1, H * cols);
    return projection.view({B, rows, H, cols}).transpose(1, 2);  // (B, H, rows, cols)
  };
  const Tensor q = make(cat(c.batch, {c.L, c.E})), k = make(cat(c.batch, {c.S, c.E})),
               v = make(cat(c.batch, {c.S, c.Ev})), gy = make(cat(c.batch, {c.L, c.Ev}));
  if (head_views) REQUIRE((!q.is_contiguous() && q.stride(3) == 1));
  const Tensor mask = make_mask(c, dtype);
  const bool causal = c.mask == MaskKind::Causal;
  const Stream stream = stream_now();
  const SdpaGrads fused = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    Tensor out = F::scaled_dot_product_attention(a, b, d, mask, dropout_p, causal);
    REQUIRE(ran_fused(out));
    CHECK(out.dtype() == dtype);
    // In place on the CPU: the output heads come laid out as (B, L, H, Ev).
    if (head_views) CHECK(out.transpose(1, 2).is_contiguous());
    return out;
  });
  const Tensor keep = dropout_p > 0 ? fused_keep_mask(c, stream, dropout_p) : Tensor();
  const DType ref_dtype = dtype == kFloat64 ? kFloat64 : kFloat32;
  auto wide = [&](const Tensor& t) { return t.defined() && t.dtype() != kBool ? t.to(ref_dtype) : t; };
  const SdpaGrads ref =
      sdpa_grads(wide(q), wide(k), wide(v), wide(gy), [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return F::detail::sdpa_reference(a, b, d, wide(mask), dropout_p, causal, std::nullopt, keep);
  });
  if (dtype == kFloat32) return require_close(fused, ref);
  const double tol = dtype == kBFloat16 ? 1.6e-2 : 2e-3;
  const double atol = dtype == kFloat64 ? 1e-11 : tol, rtol = dtype == kFloat64 ? 1e-10 : tol;
  for (const Tensor* g : {&fused.dq, &fused.dk, &fused.dv}) CHECK(g->dtype() == dtype);
  require_close(wide(fused.out), ref.out, atol, rtol, "out");
  require_close(wide(fused.dq), ref.dq, atol, rtol, "dq");
  require_close(wide(fused.dk), ref.dk, atol, rtol, "dk");
  require_close(wide(fused.dv), ref.dv, atol, rtol, "dv");
}

}  // namespace

TEST_CASE("sdpa fused kernel matches the composition of ops", "[attention]") {
  manual_seed(1);
  const std::vector<Case> cases = {
      {{2, 3}, 5, 7, 4, 6, MaskKind::None},
      {{2, 3}, 37, 133, 16, 9, MaskKind::None},     // several query and key tiles, partial last ones
      {{2, 2}, 19, 70, 1, 3, MaskKind::BoolLS, true},
      {{2, 2}, 21, 65, 3, 5, MaskKind::BoolB11S},
      {{2, 2}, 17, 66, 64, 64, MaskKind::BoolBHLS, true},
      {{2, 2}, 9, 11, 128, 32, MaskKind::FloatLS, true},
      {{2, 3}, 33, 70, 16, 8, MaskKind::FloatBHLS},
      {{2, 2}, 40, 70, 16, 8, MaskKind::Causal},   // L < S
      {{2, 2}, 90, 20, 3, 8, MaskKind::Causal},    // L > S: every row still sees key 0
      {{3}, 13, 29, 8, 5, MaskKind::BoolBHLS},     // 3-D (N, L, E)
      {{}, 6, 10, 4, 4, MaskKind::FloatLS},        // 2-D (L, E)
  };
  for (const Case& c : cases) check_fused_matches_reference(c);
}

// The CPU kernel's tiles are 128 query rows by 256 keys (kernels/cpu/attention.cpp): these
// shapes have several of each with a partial last one, E and Ev that are no multiple of a
// vector width, causal tiles cut by the diagonal with L != S, and float64 through the same
// GEMMs.
TEST_CASE("sdpa fused kernel matches the composition across many tiles", "[attention]") {
  manual_seed(8);
  const std::vector<Case> cases = {
      {{1, 2}, 300, 600, 24, 40, MaskKind::None},
      {{1, 2}, 300, 600, 24, 40, MaskKind::Causal},    // L < S: the keys past L are never seen
      {{1, 2}, 600, 270, 13, 7, MaskKind::Causal},     // L > S
      {{2, 1}, 260, 530, 20, 20, MaskKind::BoolB11S},  // a padding mask, broadcast over L
      {{1, 2}, 140, 300, 17, 9, MaskKind::FloatBHLS, true},
  };
  for (const Case& c : cases) check_fused_matches_reference(c);
  // float64: the same GEMMs in double, to float64 rounding.
  for (const Case& c : {cases[1], cases[3]}) check_fused_matches_reference(c, kFloat64);
}

// MultiheadAttention's heads: views of its projections with a row stride of the model
// width, read and written in place, through several tiles, masks, dropout and dtypes.
TEST_CASE("sdpa fused kernel reads heads in place from projection views", "[attention]") {
  manual_seed(9);
  const std::vector<Case> cases = {
      {{2, 3}, 37, 133, 16, 9, MaskKind::None},
      {{2, 2}, 17, 66, 64, 64, MaskKind::BoolBHLS, true},
      {{2, 2}, 21, 65, 3, 5, MaskKind::BoolB11S},
      {{1, 2}, 300, 600, 24, 40, MaskKind::Causal},
      {{2, 2}, 90, 20, 3, 8, MaskKind::Causal},
  };
  for (const Case& c : cases) check_fused_matches_reference(c, kFloat32, 0, true);
  check_fused_matches_reference(cases[3], kFloat32, 0.25, true);  // dropout, several tiles
  check_fused_matches_reference(cases[0], kFloat64, 0, true);
  check_fused_matches_reference(cases[1], kBFloat16, 0, true);
  check_fused_matches_reference(cases[2], kFloat16, 0, true);
}

// Few (n = batch x heads) against the threads: the backward splits each n's keys into runs
// on different threads, each with its own dq, summed after (kernels/cpu/attention.cpp).
TEST_CASE("sdpa fused backward splits the keys of a lone head over threads", "[attention]") {
  manual_seed(9);
  struct Threads {  // 4 threads while it lives, whatever the machine has
    int before = get_num_threads();
    Threads() { set_num_threads(4); }
    ~Threads() { set_num_threads(before); }
  } four;
  for (const Case& c : {Case{{}, 200, 1100, 16, 8, MaskKind::None}, Case{{1}, 700, 1100, 8, 16, MaskKind::Causal},
                        Case{{2}, 90, 600, 5, 3, MaskKind::FloatLS}})
    check_fused_matches_reference(c);
  // With dropout every run draws the keep bits of its own keys.
  check_fused_matches_reference(Case{{1}, 300, 1100, 8, 16, MaskKind::Causal}, kFloat32, 0.3);
}

TEST_CASE("sdpa broadcasts key and value over the query's leading dims", "[attention]") {
  manual_seed(2);
  const Tensor q = random_nonzero({2, 3, 9, 8}), k = random_nonzero({1, 3, 12, 8}), v = random_nonzero({2, 1, 12, 5});
  const Tensor gy = random_nonzero({2, 3, 9, 5});
  const Tensor mask = rand({2, 1, 9, 12}).lt(0.8);
  const SdpaGrads fused = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return F::scaled_dot_product_attention(a, b, d, mask);
  });
  const SdpaGrads ref = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return F::detail::sdpa_reference(a, b, d, mask, 0.0, false, std::nullopt);
  });
  require_close(fused, ref);
}

TEST_CASE("sdpa rows with every key masked give 0 and gradient 0", "[attention]") {
  manual_seed(3);
  const Tensor q = random_nonzero({1, 2, 4, 3}), k = random_nonzero({1, 2, 6, 3}), v = random_nonzero({1, 2, 6, 2});
  Tensor keep = ones({4, 6}, kBool);
  keep.select(0, 1).fill_(false);
  for (const Tensor& mask : {keep, zeros({4, 6}).masked_fill(keep.logical_not(), -INFINITY)}) {
    for (bool reference : {false, true}) {
      const SdpaGrads r =
          sdpa_grads(q, k, v, ones({1, 2, 4, 2}), [&](const Tensor& a, const Tensor& b, const Tensor& d) {
        return reference ? F::detail::sdpa_reference(a, b, d, mask, 0.0, false, std::nullopt)
                         : F::scaled_dot_product_attention(a, b, d, mask);
      });
      CHECK(r.out.select(2, 1).abs().max().item<float>() == 0);
      CHECK(r.dq.select(2, 1).abs().max().item<float>() == 0);
      CHECK(r.out.select(2, 0).abs().max().item<float>() > 0);
      CHECK_FALSE(r.dk.isnan().any().item<bool>());
    }
  }
}

TEST_CASE("sdpa fused backward passes float64 gradcheck", "[attention]") {
  manual_seed(4);
  struct GCase {
    int64_t L, S, E, Ev;
    MaskKind mask;
    bool dead_row;
  };
  for (const GCase& g : {GCase{5, 7, 3, 4, MaskKind::None, false}, GCase{5, 7, 3, 2, MaskKind::BoolLS, true},
                         GCase{4, 6, 2, 3, MaskKind::FloatBHLS, false}, GCase{7, 5, 3, 2, MaskKind::Causal, false},
                         GCase{3, 70, 2, 2, MaskKind::Causal, false}, GCase{4, 70, 2, 2, MaskKind::BoolBHLS, true}}) {
    const Case c{{2, 2}, g.L, g.S, g.E, g.Ev, g.mask, g.dead_row};
    INFO(describe(c));
    const Tensor mask = make_mask(c, kFloat64);
    const bool causal = g.mask == MaskKind::Causal;
    auto f = [&](const std::vector<Tensor>& in) {
      Tensor out = F::scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, causal);
      if (out.requires_grad()) REQUIRE(ran_fused(out));  // gradcheck's numeric passes record nothing
      return out;
    };
    CHECK(gradcheck(f, {leaf({2, 2, g.L, g.E}), leaf({2, 2, g.S, g.E}), leaf({2, 2, g.S, g.Ev})}));
  }
}

// Every evaluation seeds the generator alike, so the numeric passes and the backward all see
// one dropout mask (the backward reuses its forward's: Note [attention dropout]).
TEST_CASE("sdpa fused backward with dropout passes float64 gradcheck", "[attention]") {
  manual_seed(35);
  struct GCase {
    int64_t L, S, E, Ev;
    MaskKind mask;
    double p;
  };
  for (const GCase& g : {GCase{5, 7, 3, 4, MaskKind::None, 0.5}, GCase{4, 6, 2, 3, MaskKind::FloatBHLS, 0.3},
                         GCase{7, 5, 3, 2, MaskKind::Causal, 0.3}, GCase{4, 70, 2, 2, MaskKind::BoolBHLS, 0.2}}) {
    const Case c{{2, 2}, g.L, g.S, g.E, g.Ev, g.mask, false};
    INFO(describe(c) << ", dropout_p " << g.p);
    const Tensor mask = make_mask(c, kFloat64);
    const bool causal = g.mask == MaskKind::Causal;
    auto f = [&](const std::vector<Tensor>& in) {
      manual_seed(36);
      Tensor out = F::scaled_dot_product_attention(in[0], in[1], in[2], mask, g.p, causal);
      if (out.requires_grad()) REQUIRE(ran_fused(out));
      return out;
    };
    CHECK(gradcheck(f, {leaf({2, 2, g.L, g.E}), leaf({2, 2, g.S, g.E}), leaf({2, 2, g.S, g.Ev})}));
  }
}

TEST_CASE("sdpa matches PyTorch 2.x golden values", "[attention]") {
  const SafetensorsFile& golden = golden_file("attention");
  auto fixture = [&](const std::string& name) {
    auto it = golden.tensors.find(name);
    INFO("fixture " << name);
    REQUIRE(it != golden.tensors.end());
    return it->second;
  };
  std::istringstream names(golden.metadata.at("cases"));
  int cases = 0;
  for (std::string c; std::getline(names, c, ',');) {
    INFO("case " << c);
    ++cases;
    Tensor mask;
    if (golden.tensors.count(c + ".mask")) {
      mask = fixture(c + ".mask");
      if (fixture(c + ".mask_is_bool").item<int64_t>() == 1) mask = mask.ne(0);
    }
    const bool causal = golden.metadata.at(c + ".causal") == "1";
    const std::string scale_text = golden.metadata.at(c + ".scale");
    const std::optional<double> scale =
        scale_text == "none" ? std::nullopt : std::optional<double>(std::stod(scale_text));
    const SdpaGrads r = sdpa_grads(fixture(c + ".q"), fixture(c + ".k"), fixture(c + ".v"), fixture(c + ".gy"),
                         [&](const Tensor& a, const Tensor& b, const Tensor& d) {
                           return F::scaled_dot_product_attention(a, b, d, mask, 0.0, causal, scale);
                         });
    require_close(r.out, fixture(c + ".out"), 1e-5, 1e-5, "out");
    require_close(r.dq, fixture(c + ".grad_q"), 1e-5, 1e-5, "grad_q");
    require_close(r.dk, fixture(c + ".grad_k"), 1e-5, 1e-5, "grad_k");
    require_close(r.dv, fixture(c + ".grad_v"), 1e-5, 1e-5, "grad_v");
  }
  CHECK(cases == 13);
}

TEST_CASE("sdpa dropout drops and rescales the attention weights", "[attention]") {
  manual_seed(5);
  const Tensor q = random_nonzero({2, 2, 6, 4}), k = random_nonzero({2, 2, 9, 4}), v = random_nonzero({2, 2, 9, 3});
  const Tensor plain = F::scaled_dot_product_attention(q, k, v);
  CHECK(F::scaled_dot_product_attention(q, k, v, Tensor(), 0.0).eq(plain).all().item<bool>());  // p = 0: deterministic

  manual_seed(11);
  const Tensor dropped = F::scaled_dot_product_attention(q, k, v, Tensor(), 0.5);
  manual_seed(11);
  CHECK(F::scaled_dot_product_attention(q, k, v, Tensor(), 0.5).eq(dropped).all().item<bool>());  // same seed, same draw
  CHECK_FALSE(allclose(dropped, plain, 1e-3, 1e-3));
  manual_seed(12);
  CHECK_FALSE(allclose(F::scaled_dot_product_attention(q, k, v, Tensor(), 0.5), dropped, 1e-3, 1e-3));

  // The draw is the fused kernel's keep mask from seed 11, kept weights scaled by 1 / (1 - p).
  const Tensor keep = F::detail::sdpa_dropout_mask(11, 0, 4, 6, 9, 0.5).reshape({2, 2, 6, 9});
  const Tensor weights = (q.matmul(k.transpose(-2, -1)) * 0.5).softmax(-1);  // scale 1 / sqrt(4)
  require_close(dropped, (weights * keep.to(kFloat32) * 2.0).matmul(v), 1e-6, 1e-5, "dropped");

  // Averaged over many draws, dropout keeps the expected value.
  Tensor mean = zeros_like(plain);
  const int draws = 400;
  for (int i = 0; i < draws; ++i) mean = mean + F::scaled_dot_product_attention(q, k, v, Tensor(), 0.5);
  require_close(mean / double(draws), plain, 0.15, 0.0, "mean of the draws");
}

// Note [attention dropout]: the fused kernels drop the weights themselves, by keep bits
// they draw again in the backward; the composition given the same mask is the reference.
TEST_CASE("sdpa fused dropout matches the composition on the fused kernel's mask", "[attention]") {
  manual_seed(31);
  const std::vector<std::pair<Case, double>> cases = {
      {{{2, 3}, 5, 7, 4, 6, MaskKind::None}, 0.5},
      {{{2, 2}, 19, 70, 1, 3, MaskKind::BoolLS, true}, 0.2},
      {{{2, 2}, 21, 65, 3, 5, MaskKind::BoolB11S}, 0.3},
      {{{2, 3}, 33, 70, 16, 8, MaskKind::FloatBHLS, true}, 0.3},
      {{{2, 2}, 9, 11, 12, 32, MaskKind::FloatLS}, 0.7},
      {{{2, 2}, 40, 70, 16, 8, MaskKind::Causal}, 0.1},        // L < S
      {{{2, 2}, 90, 21, 3, 8, MaskKind::Causal}, 0.4},         // L > S, S no multiple of 4
      {{{1, 2}, 300, 601, 24, 40, MaskKind::None}, 0.25},      // several tiles each way, partial last ones
      {{{1, 2}, 300, 530, 24, 40, MaskKind::Causal}, 0.25},
      {{{2, 1}, 260, 530, 20, 20, MaskKind::BoolB11S}, 0.5},
      {{{1, 2}, 140, 300, 17, 9, MaskKind::FloatBHLS, true}, 0.15},
      {{{}, 6, 10, 4, 4, MaskKind::FloatLS}, 0.5},             // 2-D (L, E)
  };
  for (const auto& [c, p] : cases) check_fused_matches_reference(c, kFloat32, p);
  for (size_t i : {size_t(1), size_t(6), size_t(8), size_t(10)})
    check_fused_matches_reference(cases[i].first, kFloat64, cases[i].second);
}

TEST_CASE("sdpa fused dropout takes bfloat16 and float16 operands", "[attention]") {
  manual_seed(32);
  for (DType dtype : {kBFloat16, kFloat16}) {
    check_fused_matches_reference({{2, 2}, 21, 65, 3, 5, MaskKind::BoolB11S}, dtype, 0.3);
    check_fused_matches_reference({{1, 2}, 140, 300, 16, 8, MaskKind::Causal}, dtype, 0.2);
  }
}

// The keep bits themselves: their fraction, their independence of (n, i, j) and of the seed
// and offset, and that the kernel drops exactly the weights the mask says: with q = 0 every
// weight is 1 / S, and with v the identity out (N, L, S) is keep / (S (1 - p)).
TEST_CASE("sdpa fused dropout keeps each weight with probability 1 - p, by its mask", "[attention]") {
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p " << p);
    const int64_t N = 3, L = 400, S = 1001;
    const Tensor keep = F::detail::sdpa_dropout_mask(77, 5, N, L, S, p);
    const double n = double(N * L * S), kept = keep.to(kFloat64).sum().item<double>() / n;
    CHECK(std::abs(kept - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));
    // Entries, rows, columns, seeds and offsets draw different bits: each pair agrees about as
    // often as two independent draws, p^2 + (1 - p)^2, never everywhere.
    auto agreement = [&](const Tensor& a, const Tensor& b) { return a.eq(b).to(kFloat64).mean().item<double>(); };
    const double independent = p * p + (1 - p) * (1 - p);
    auto check_independent = [&](const Tensor& a, const Tensor& b, const char* what) {
      INFO(what);
      CHECK(std::abs(agreement(a, b) - independent) < 0.01);
    };
    check_independent(keep.select(0, 0), keep.select(0, 1), "batch entries n");
    check_independent(keep.narrow(1, 0, L / 2), keep.narrow(1, L / 2, L / 2), "query rows i");
    check_independent(keep.narrow(2, 0, 500), keep.narrow(2, 500, 500), "keys j");
    check_independent(keep.narrow(2, 0, 500), keep.narrow(2, 1, 500), "neighbouring keys j");
    check_independent(keep, F::detail::sdpa_dropout_mask(78, 5, N, L, S, p), "seeds");
    check_independent(keep, F::detail::sdpa_dropout_mask(77, 6, N, L, S, p), "offsets");
  }
  // The kernel drops the weights the mask names, across tiles of rows and keys.
  manual_seed(33);
  const int64_t N = 2, L = 260, S = 300;
  const double p = 0.3;
  const Tensor q = zeros({N, L, 8}), k = random_nonzero({N, S, 8});
  const Tensor v = arange(S).unsqueeze(1).eq(arange(S)).to(kFloat32).expand({N, S, S}).contiguous();  // identities
  const Stream stream = stream_now();
  const Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), p);  // (N, L, S)
  CHECK(default_generator().offset() - stream.offset == uint64_t(N * L * ((S + 3) / 4)));  // the blocks it reserved
  const Tensor keep = F::detail::sdpa_dropout_mask(stream.seed, stream.offset, N, L, S, p);
  CHECK(out.ne(0).eq(keep).all().item<bool>());
  require_close(out, keep.to(kFloat32) / (S * (1 - p)), 1e-9, 1e-6, "out");
}

TEST_CASE("sdpa fused dropout: the backward uses the forward's mask", "[attention]") {
  manual_seed(34);
  const Case c{{2, 2}, 70, 300, 8, 6, MaskKind::None};
  const double p = 0.4;
  const Tensor q = random_nonzero({2, 2, 70, 8}), k = random_nonzero({2, 2, 300, 8});
  const Tensor v = random_nonzero({2, 2, 300, 6});
  const Tensor gy = random_nonzero({2, 2, 70, 6});
  const Stream stream = stream_now();
  const SdpaGrads fused = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    Tensor out = F::scaled_dot_product_attention(a, b, d, Tensor(), p);
    REQUIRE(ran_fused(out));
    rand({1000});  // another op draws before the backward runs
    F::scaled_dot_product_attention(a, b, d, Tensor(), p);  // and another attention
    return out;
  });
  const Tensor keep = fused_keep_mask(c, stream, p);
  const SdpaGrads ref = sdpa_grads(q, k, v, gy, [&](const Tensor& a, const Tensor& b, const Tensor& d) {
    return F::detail::sdpa_reference(a, b, d, Tensor(), p, false, std::nullopt, keep);
  });
  require_close(fused, ref);
}

TEST_CASE("sdpa under CPU autocast runs in bfloat16", "[attention]") {
  manual_seed(6);
  const Tensor q = random_nonzero({2, 5, 8}), k = random_nonzero({2, 7, 8}), v = random_nonzero({2, 7, 4});
  Tensor mask = rand({5, 7}).lt(0.8);
  mask.select(1, 0).fill_(true);
  const Tensor expected = F::scaled_dot_product_attention(q, k, v, mask);
  amp::AutocastGuard autocast(kCPU, kBFloat16);
  const Tensor out = F::scaled_dot_product_attention(q, k, v, mask);
  CHECK(out.dtype() == kBFloat16);
  require_close(out.to(kFloat32), expected, 5e-2, 5e-2, "bfloat16 out");
}

TEST_CASE("sdpa fused kernel takes bfloat16 and float16 operands", "[attention]") {
  manual_seed(7);
  const std::vector<Case> cases = {
      {{2, 3}, 37, 133, 16, 9, MaskKind::None},
      {{2, 2}, 21, 65, 3, 5, MaskKind::BoolB11S},  // a broadcast bias, widened as one row
      {{2, 2}, 17, 66, 64, 64, MaskKind::FloatBHLS, true},
      {{2, 2}, 40, 70, 16, 8, MaskKind::Causal},
  };
  for (DType dtype : {kBFloat16, kFloat16})
    for (const Case& c : cases) check_fused_matches_reference(c, dtype);
}

TEST_CASE("sdpa rejects bad arguments with typed errors", "[attention]") {
  const Tensor q = randn({2, 3, 5, 4}), k = randn({2, 3, 7, 4}), v = randn({2, 3, 7, 6});
  const std::string op = "scaled_dot_product_attention";
  require_throws_with<ShapeError>([&] { F::scaled_dot_product_attention(randn({4}), k, v); }, {op, "(4,)", "2 dims"});
  require_throws_with<ShapeError>([&] { F::scaled_dot_product_attention(randn({2, 3, 5, 3}), k, v); },
                                  {op, "(2, 3, 5, 3)", "embedding size E"});
  require_throws_with<ShapeError>([&] { F::scaled_dot_product_attention(q, k, randn({2, 3, 6, 6})); },
                                  {op, "(2, 3, 6, 6)", "sequence length S"});
  require_throws_with<ShapeError>([&] { F::scaled_dot_product_attention(q, randn({4, 3, 7, 4}), v); }, {op});
  require_throws_with<ShapeError>([&] { F::scaled_dot_product_attention(q, k, v, ones({5, 6}, kBool)); },
                                  {op, "(5, 6)", "(2, 3, 5, 7)"});
  require_throws_with<ShapeError>([&] { F::scaled_dot_product_attention(q, k, v, ones({3, 3, 5, 7}, kBool)); },
                                  {op, "(3, 3, 5, 7)"});
  require_throws_with<DTypeError>([&] { F::scaled_dot_product_attention(q, k, v, ones({5, 7}, kInt64)); },
                                  {op, "attn_mask", "int64"});
  require_throws_with<DTypeError>([&] { F::scaled_dot_product_attention(q, k.to(kFloat64), v); },
                                  {op, "float32", "float64"});
  require_throws_with<DTypeError>([&] { F::scaled_dot_product_attention(q.to(kInt64), k.to(kInt64), v.to(kInt64)); },
                                  {op, "int64"});
  require_throws_with<ValueError>([&] { F::scaled_dot_product_attention(q, k, v, ones({5, 7}, kBool), 0.0, true); },
                                  {op, "is_causal"});
  require_throws_with<ValueError>([&] { F::scaled_dot_product_attention(q, k, v, Tensor(), 1.0); },
                                  {op, "dropout_p"});
}

TEST_CASE("docs/nn.md: the attention example runs", "[attention]") {
  manual_seed(7);
  // The body of the example in docs/nn.md (keep the two in step).
  Tensor q = randn({2, 4, 10, 16}), k = randn({2, 4, 12, 16}), v = randn({2, 4, 12, 8});  // (B, H, L|S, E|Ev)
  Tensor padding = ones({2, 1, 1, 12}, kBool);  // (B, 1, 1, S): true = may attend
  padding.select(0, 1).narrow(-1, 9, 3).fill_(false);  // the second sequence has 9 keys
  Tensor out = nn::functional::scaled_dot_product_attention(q, k, v, padding);  // (2, 4, 10, 8)
  Tensor causal = nn::functional::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/true);

  CHECK(out.sizes() == Shape{2, 4, 10, 8});
  CHECK(causal.sizes() == Shape{2, 4, 10, 8});
  // The second sequence ignores its last 3 keys: changing them changes nothing.
  Tensor v2 = v.clone();
  v2.select(0, 1).narrow(-2, 9, 3).fill_(100.0);
  CHECK(allclose(nn::functional::scaled_dot_product_attention(q, k, v2, padding).select(0, 1), out.select(0, 1)));
  // Causal: query 0 sees key 0 only.
  CHECK(allclose(causal.select(2, 0), v.select(2, 0)));

  // The scope example: the composition gives the same numbers; the fused tiers only.
  namespace A = nn::attention;
  const Tensor fused_out = nn::functional::scaled_dot_product_attention(q, k, v);
  {
    A::SdpaKernelGuard only(A::SDPBackend::MATH);  // with sdpa_kernel(SDPBackend.MATH):
    Tensor composed = nn::functional::scaled_dot_product_attention(q, k, v);
    CHECK(allclose(composed, fused_out, 1e-5, 1e-6));
  }
  A::SdpaKernelGuard fused({A::SDPBackend::CUDNN_ATTENTION, A::SDPBackend::FLASH_ATTENTION});
  CHECK(allclose(nn::functional::scaled_dot_product_attention(q, k, v, padding), out));
}
