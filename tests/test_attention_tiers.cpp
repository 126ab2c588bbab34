// The attention tiers on the host (Note [attention tiers] in kernels/attention/attention_backend.h):
// which tier each refusal selects, the forced-tier scope (SdpaKernelGuard) and its error,
// the cuDNN plan cache's keys (every field a graph depends on, and nothing else) and its
// bound (kernels/support/lru_cache.h), and the rules by which cuDNN refuses a call before any graph
// is built (Note [cuDNN attention plans]). None of this needs a GPU; the tiers themselves run
// against the composition in tests/test_attention_cuda.cpp.
#include "catch2_compat.h"

#include <limits>
#include <map>
#include <string>

#include "autograd/functions/attention.h"
#include "autograd/node.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/cudnn_attention_plan.h"
#include "kernels/support/lru_cache.h"
#include "loom.h"
#include "test_util.h"

using namespace loom;
using namespace loom::test;
namespace F = loom::nn::functional;
using kernels::SDPBackend;

namespace {

// The name of the fused node out's history runs through ("" for the composition).
std::string fused_node(const Tensor& out) {
  for (std::shared_ptr<Node> node = out.grad_fn(); node;
       node = node->next_edges().empty() ? nullptr : node->next_edges()[0].fn)
    if (node->name().find("ScaledDotProduct") == 0) return node->name();
  return "";
}

// A refusal function for choose_sdp_backend that answers from a table and counts the asks.
struct Refusals {
  std::map<SDPBackend, std::string> why;
  std::map<SDPBackend, int> asked;
  std::function<std::string(SDPBackend)> fn() {
    return [this](SDPBackend b) {
      ++asked[b];
      return why[b];
    };
  }
};

// (B, H, rows, cols) heads viewed out of a (B, rows, H * cols + extra) projection, as
// MultiheadAttention makes them (extra = 0).
Tensor heads_view(int64_t B, int64_t H, int64_t rows, int64_t cols, DType dtype, int64_t extra = 0) {
  return random_nonzero({B, rows, H * cols + extra}, dtype).narrow(2, 0, H * cols).view({B, rows, H, cols}).transpose(1, 2);
}

}  // namespace

TEST_CASE("sdpa tiers: the first allowed tier that takes a call runs it, MATH last", "[attention][tiers]") {
  Refusals r;
  CHECK(kernels::choose_sdp_backend("op", r.fn()) == SDPBackend::CUDNN_ATTENTION);
  CHECK(r.asked[SDPBackend::FLASH_ATTENTION] == 0);  // not asked once cuDNN took it
  r.why[SDPBackend::CUDNN_ATTENTION] = "float32";
  CHECK(kernels::choose_sdp_backend("op", r.fn()) == SDPBackend::FLASH_ATTENTION);
  r.why[SDPBackend::FLASH_ATTENTION] = "head dim 129";
  CHECK(kernels::choose_sdp_backend("op", r.fn()) == SDPBackend::MATH);

  // A scope: only what it allows is asked, and MATH only when allowed.
  r.asked.clear();
  {
    kernels::SdpaKernelGuard only_math(SDPBackend::MATH);
    CHECK(kernels::choose_sdp_backend("op", r.fn()) == SDPBackend::MATH);
    CHECK(r.asked.empty());
    {
      kernels::SdpaKernelGuard inner({SDPBackend::FLASH_ATTENTION, SDPBackend::MATH});  // nested: replaces
      CHECK(kernels::choose_sdp_backend("op", r.fn()) == SDPBackend::MATH);
      CHECK(r.asked[SDPBackend::FLASH_ATTENTION] == 1);
      CHECK(r.asked.count(SDPBackend::CUDNN_ATTENTION) == 0);
    }
    CHECK(kernels::sdp_backend_enabled(SDPBackend::MATH));
    CHECK_FALSE(kernels::sdp_backend_enabled(SDPBackend::FLASH_ATTENTION));  // the outer scope is back
  }
  for (SDPBackend b : {SDPBackend::MATH, SDPBackend::FLASH_ATTENTION, SDPBackend::CUDNN_ATTENTION})
    CHECK(kernels::sdp_backend_enabled(b));

  // Forced to tiers that all refuse: the error names each and why (only a scope can do this).
  kernels::SdpaKernelGuard fused_only({SDPBackend::CUDNN_ATTENTION, SDPBackend::FLASH_ATTENTION});
  require_throws_with<NotImplementedError>(
      [&] { kernels::choose_sdp_backend("scaled_dot_product_attention", r.fn()); },
      {"scaled_dot_product_attention", "no available kernel", "CUDNN_ATTENTION: float32",
       "FLASH_ATTENTION: head dim 129"});
  r.why[SDPBackend::FLASH_ATTENTION] = "";
  CHECK(kernels::choose_sdp_backend("op", r.fn()) == SDPBackend::FLASH_ATTENTION);
  require_throws_with<ValueError>([] { kernels::SdpaKernelGuard none(std::initializer_list<SDPBackend>{}); },
                                  {"sdpa_kernel", "at least one backend"});
  CHECK(std::string(kernels::sdp_backend_name(SDPBackend::CUDNN_ATTENTION)) == "CUDNN_ATTENTION");
  CHECK(std::string(kernels::sdp_backend_name(SDPBackend::FLASH_ATTENTION)) == "FLASH_ATTENTION");
  CHECK(std::string(kernels::sdp_backend_name(SDPBackend::MATH)) == "MATH");
}

TEST_CASE("sdpa tiers on the CPU: cuDNN refuses, the fused kernel runs, MATH where forced or needed",
          "[attention][tiers]") {
  manual_seed(41);
  namespace A = nn::attention;
  const Tensor q = random_nonzero({2, 3, 5, 8}, kFloat64).requires_grad_(true);
  const Tensor k = random_nonzero({2, 3, 7, 8}, kFloat64), v = random_nonzero({2, 3, 7, 4}, kFloat64);
  const std::string no_cudnn =
      kernels::attention_refusal(SDPBackend::CUDNN_ATTENTION, q, k, v, Tensor(), false, 0.0, true);
  CHECK(no_cudnn.find("no cuDNN attention") != std::string::npos);
  CHECK(kernels::attention_refusal(SDPBackend::FLASH_ATTENTION, q, k, v, Tensor(), false, 0.0, true).empty());
  CHECK(kernels::attention_refusal(SDPBackend::MATH, q, k, v, Tensor(), false, 0.0, true).empty());

  const Tensor fused = F::scaled_dot_product_attention(q, k, v);
  CHECK(fused_node(fused) == "ScaledDotProductAttentionBackward");
  const Tensor expected = F::detail::sdpa_reference(q, k, v, Tensor(), 0.0, false, std::nullopt);
  CHECK(allclose(fused, expected, 1e-10, 1e-12));
  {
    A::SdpaKernelGuard math(A::SDPBackend::MATH);
    const Tensor composed = F::scaled_dot_product_attention(q, k, v);
    CHECK(fused_node(composed).empty());
    CHECK(allclose(composed, expected, 1e-12, 1e-12));
  }
  {
    A::SdpaKernelGuard cudnn(A::SDPBackend::CUDNN_ATTENTION);
    require_throws_with<NotImplementedError>([&] { F::scaled_dot_product_attention(q, k, v); },
                                             {"scaled_dot_product_attention", "CUDNN_ATTENTION", "no cuDNN attention"});
  }
  // A mask that requires grad: the fused tiers give it none, so the composition runs, and
  // forcing a fused tier says why.
  const Tensor mask = random_nonzero({5, 7}, kFloat64).requires_grad_(true);
  CHECK(fused_node(F::scaled_dot_product_attention(q, k, v, mask)).empty());
  {
    A::SdpaKernelGuard flash(A::SDPBackend::FLASH_ATTENTION);
    require_throws_with<NotImplementedError>([&] { F::scaled_dot_product_attention(q, k, v, mask); },
                                             {"FLASH_ATTENTION", "attn_mask requires grad"});
    CHECK(fused_node(F::scaled_dot_product_attention(q, k, v, mask.detach())) == "ScaledDotProductAttentionBackward");
  }
}

TEST_CASE("cuDNN attention plans: the key holds every field a graph depends on, and nothing else",
          "[attention][tiers]") {
  manual_seed(42);
  const int64_t B = 2, H = 4, L = 16, S = 24, E = 32;
  auto signature = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool causal, double p) {
    return kernels::attention_signature(q, k, v, Tensor(), bias, causal, p);
  };
  const Tensor q = heads_view(B, H, L, E, kBFloat16), k = heads_view(B, H, S, E, kBFloat16),
               v = heads_view(B, H, S, E, kBFloat16);
  const Tensor padding = zeros({B, 1, 1, S}, kBFloat16).expand({B, H, L, S});
  const kernels::AttentionSignature base = signature(q, k, v, padding, false, 0.1);
  CHECK(base.B == B);
  CHECK(base.H == H);
  CHECK(base.L == L);
  CHECK(base.S == S);
  CHECK(base.heads);
  CHECK(base.mask == kernels::AttentionMaskKind::KeyPadding);
  CHECK(base.q == kernels::AttentionSignature::Strides{L * H * E, E, H * E, 1});
  CHECK(base.bias == kernels::AttentionSignature::Strides{S, 0, 0, 1});

  // The same call on other data (other pointers, other values): the same key.
  const kernels::AttentionSignature again =
      signature(heads_view(B, H, L, E, kBFloat16), heads_view(B, H, S, E, kBFloat16),
                heads_view(B, H, S, E, kBFloat16), random_nonzero({B, 1, 1, S}, kBFloat16).expand({B, H, L, S}), false,
                0.1);
  CHECK(again == base);
  CHECK(kernels::AttentionSignatureHash{}(again) == kernels::AttentionSignatureHash{}(base));

  // Each field on its own gives another key.
  const std::vector<std::pair<std::string, kernels::AttentionSignature>> others = {
      {"dtype", signature(q.to(kFloat16), k.to(kFloat16), v.to(kFloat16), padding.to(kFloat16), false, 0.1)},
      {"L", signature(heads_view(B, H, L + 8, E, kBFloat16), k, v, zeros({B, 1, 1, S}, kBFloat16).expand({B, H, L + 8, S}),
                      false, 0.1)},
      {"S", signature(q, heads_view(B, H, S + 8, E, kBFloat16), heads_view(B, H, S + 8, E, kBFloat16),
                      zeros({B, 1, 1, S + 8}, kBFloat16).expand({B, H, L, S + 8}), false, 0.1)},
      {"Ev", signature(q, k, heads_view(B, H, S, 16, kBFloat16), padding, false, 0.1)},
      {"q strides", signature(heads_view(B, H, L, E, kBFloat16, 8), k, v, padding, false, 0.1)},
      {"k strides", signature(q, heads_view(B, H, S, E, kBFloat16, 8), v, padding, false, 0.1)},
      {"v strides", signature(q, k, random_nonzero({B, H, S, E}, kBFloat16), padding, false, 0.1)},
      {"mask kind", signature(q, k, v, zeros({L, S}, kBFloat16).expand({B, H, L, S}), false, 0.1)},
      {"no mask", signature(q, k, v, Tensor(), false, 0.1)},
      {"causal", signature(q, k, v, Tensor(), true, 0.1)},
      {"dropout", signature(q, k, v, padding, false, 0.2)},
      {"no dropout", signature(q, k, v, padding, false, 0.0)},
      {"3-D", signature(random_nonzero({B * H, L, E}, kBFloat16), random_nonzero({B * H, S, E}, kBFloat16),
                        random_nonzero({B * H, S, E}, kBFloat16), Tensor(), false, 0.1)},
  };
  for (const auto& [what, other] : others) {
    INFO(what);
    CHECK_FALSE(other == base);
  }
  kernels::AttentionSignature device = base;
  device.device = 1;
  CHECK_FALSE(device == base);
  CHECK(signature(q, k, v, zeros({L, S}, kBFloat16).expand({B, H, L, S}), false, 0).mask ==
        kernels::AttentionMaskKind::Bias);
  CHECK(signature(q, k, v, Tensor(), false, 0).mask == kernels::AttentionMaskKind::None);

  // The output layout the key assumes is the one fused_attention makes, 4-D heads and 3-D.
  for (const Tensor& qq : {heads_view(2, 3, 5, 8, kFloat32), random_nonzero({6, 5, 8})}) {
    const Tensor kk = qq.dim() == 4 ? heads_view(2, 3, 7, 8, kFloat32) : random_nonzero({6, 7, 8});
    const Tensor vv = qq.dim() == 4 ? heads_view(2, 3, 7, 16, kFloat32) : random_nonzero({6, 7, 16});
    const Tensor out = fused_attention(qq, kk, vv, Tensor(), false, 0.5);
    CHECK(kernels::attention_strides(out) == kernels::attention_output_strides(qq, 16));
    // The backward's gradient layouts, from the signature alone (cuDNN's dq, dk, dv).
    const kernels::AttentionSignature sig = kernels::attention_signature(qq, kk, vv, out, Tensor(), false, 0);
    CHECK(kernels::attention_output_strides(sig.heads, sig.H, sig.L, sig.E) == kernels::attention_output_strides(qq, 8));
    CHECK(kernels::attention_output_strides(sig.heads, sig.H, sig.S, sig.Ev) == kernels::attention_output_strides(kk, 16));
    CHECK(kernels::attention_output_strides(sig.heads, sig.H, sig.L, sig.Ev) == sig.out);
    CHECK(kernels::attention_signature(qq, kk, vv, out, Tensor(), false, 0) ==
          kernels::attention_signature(qq, kk, vv, Tensor(), Tensor(), false, 0));
  }
}

TEST_CASE("cuDNN attention plans: the cache keeps at most its capacity, least recently used out first",
          "[attention][tiers]") {
  kernels::LruCache<int, std::string> cache(3);
  int builds = 0;
  auto get = [&](int key) -> std::string& {  // as the plan cache: build only what is not cached
    if (std::string* hit = cache.find(key)) return *hit;
    ++builds;
    return cache.insert(key, "plan " + std::to_string(key));
  };
  for (int key : {1, 2, 3}) get(key);
  CHECK(builds == 3);
  CHECK(cache.size() == 3);
  // A steady state whose signatures fit: every step finds its plans, nothing is built.
  for (int step = 0; step < 10; ++step)
    for (int key : {3, 1, 2}) CHECK(get(key) == "plan " + std::to_string(key));
  CHECK(builds == 3);
  CHECK(cache.evictions() == 0);
  // One more key drops the least recently used (3: 1 and 2 were used after it).
  get(1), get(2), get(4);
  CHECK(cache.size() == 3);
  CHECK(cache.evictions() == 1);
  CHECK(cache.find(3) == nullptr);
  CHECK(cache.find(1) != nullptr);  // and a find makes 1 the most recent
  get(5);                           // so 2 goes now
  CHECK(cache.find(2) == nullptr);
  CHECK(cache.find(1) != nullptr);
  CHECK(cache.size() == cache.capacity());
  cache.insert(1, "rebuilt");  // replacing keeps the size
  CHECK(*cache.find(1) == "rebuilt");
  CHECK(cache.size() == 3);
  CHECK(kernels::kCudnnPlanCacheCapacity >= 16);  // a model's layers and both directions fit
  require_throws_with<ValueError>([] { kernels::LruCache<int, int> none(0); }, {"capacity"});
}

TEST_CASE("cuDNN attention refusals before a build: dtypes, head dims, versions, layouts, masks",
          "[attention][tiers]") {
  manual_seed(43);
  const kernels::CudnnAttentionLimits h200{91900, 90}, a100{91900, 80}, old_cudnn{8907, 90}, turing{91900, 75};
  auto why = [](const kernels::AttentionSignature& s, const kernels::CudnnAttentionLimits& limits,
                bool needs_backward = true) { return kernels::refusal_by_cudnn_rules(s, limits, needs_backward); };
  auto call = [](int64_t E, int64_t Ev, DType dtype, int64_t L = 64, int64_t S = 64) {
    return kernels::attention_signature(heads_view(2, 4, L, E, dtype), heads_view(2, 4, S, E, dtype),
                                        heads_view(2, 4, S, Ev, dtype), Tensor(), Tensor(), false, 0);
  };
  // What cuDNN takes: 16-bit, head dims multiples of 8 up to 256 on Hopper (128 elsewhere).
  for (int64_t E : {8, 64, 128, 256}) {
    INFO("E " << E);
    CHECK(why(call(E, E, kBFloat16), h200) == "");
    CHECK(why(call(E, E, kFloat16), h200) == "");
  }
  CHECK(why(call(128, 64, kBFloat16), a100) == "");
  struct Refused {
    std::string what, reason;
  };
  const std::vector<std::pair<Refused, std::string>> refused = {
      {{"float32", "float16 and bfloat16"}, why(call(64, 64, kFloat32), h200)},
      {{"float64", "float16 and bfloat16"}, why(call(64, 64, kFloat64), h200)},
      {{"E 12", "multiples of 8"}, why(call(12, 12, kBFloat16), h200)},
      {{"Ev 20", "multiples of 8"}, why(call(64, 20, kBFloat16), h200)},
      {{"E 264 on Hopper", "up to 256"}, why(call(264, 264, kBFloat16), h200)},
      {{"E 256 on Ampere", "up to 128"}, why(call(256, 256, kBFloat16), a100)},
      {{"cuDNN 8.9", "cuDNN 9"}, why(call(64, 64, kBFloat16), old_cudnn)},
      {{"compute capability 7.5", "compute capability 8.0"}, why(call(64, 64, kBFloat16), turing)},
      {{"L = S = 1 with a backward", "L = S = 1"}, why(call(64, 64, kBFloat16, 1, 1), h200)},
      {{"L 0", "empty"}, why(call(64, 64, kBFloat16, 0, 8), h200)},
  };
  for (const auto& [expected, got] : refused) {
    INFO(expected.what << ": " << got);
    CHECK(got.find(expected.reason) != std::string::npos);
  }
  CHECK(why(call(64, 64, kBFloat16, 1, 1), h200, /*needs_backward=*/false) == "");

  // Layouts: a projection wider by 4 elements gives row strides that are no multiple of 16
  // bytes (the tensor memory accelerator's); 3-D contiguous operands are fine.
  const Tensor q = heads_view(2, 4, 64, 64, kBFloat16, 4), k = heads_view(2, 4, 64, 64, kBFloat16);
  CHECK(why(kernels::attention_signature(q, k, k, Tensor(), Tensor(), false, 0), h200).find("16 bytes") != std::string::npos);
  const Tensor q3 = random_nonzero({8, 40, 64}, kBFloat16), k3 = random_nonzero({8, 48, 64}, kBFloat16);
  CHECK(why(kernels::attention_signature(q3, k3, k3, Tensor(), Tensor(), true, 0), h200) == "");

  // Masks: a key-padding mask of S 48 and an (L, S) mask of S 48 are taken; a contiguous
  // (L, S) mask with S 45 has rows no multiple of 16 bytes apart.
  const Tensor hq = heads_view(2, 4, 40, 64, kBFloat16), hk = heads_view(2, 4, 48, 64, kBFloat16);
  const Tensor key_padding = zeros({2, 1, 1, 48}, kBFloat16).expand({2, 4, 40, 48});
  CHECK(why(kernels::attention_signature(hq, hk, hk, Tensor(), key_padding, false, 0.1), h200) == "");
  CHECK(why(kernels::attention_signature(hq, hk, hk, Tensor(), zeros({40, 48}, kBFloat16).expand({2, 4, 40, 48}), false, 0),
            h200) == "");
  const Tensor hk45 = heads_view(2, 4, 45, 64, kBFloat16);
  CHECK(why(kernels::attention_signature(hq, hk45, hk45, Tensor(), zeros({40, 45}, kBFloat16).expand({2, 4, 40, 45}), false, 0),
            h200)
            .find("mask") != std::string::npos);
}
