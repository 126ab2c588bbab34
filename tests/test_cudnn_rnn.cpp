// cuDNN's recurrent layers (kernels/cuda/cudnn_rnn.cpp): the host-side rules of
// kernels/rnn/cudnn_rnn_plan.h on the host (the algorithm rule and its override, the
// cache keys, the LRU, the weight stamps that decide when packed weights are reused), then
// on a GPU ("[.cuda]") that the plans and packed weights are reused while nothing changes
// and rebuilt when a parameter changes in place, a dtype or a shape changes, with outputs
// and gradients equal to the CPU's throughout.
#include "catch2_compat.h"

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/ops.h"
#include "kernels/kernels.h"
#include "kernels/rnn/cudnn_rnn_plan.h"
#include "nn/rnn.h"
#include "tests/cuda_test_util.h"
#include "tests/test_util.h"

using namespace loom;
using kernels::RNNMode;
using kernels::cuda::CudnnRNNAlgo;
using kernels::cuda::RNNAlgoQuery;

namespace {

// lstm-sentiment's layer (B 64, T 256, 128 -> 256) on an H200 (9.0, 132 SMs).
RNNAlgoQuery sentiment(DType dtype) {
  RNNAlgoQuery q;
  q.mode = RNNMode::LSTM;
  q.dtype = dtype;
  q.input_size = 128;
  q.hidden_size = 256;
  q.steps = 256;
  q.batch = 64;
  q.training = true;
  q.sm_major = 9;
  q.sm_minor = 0;
  q.sm_count = 132;
  return q;
}

}  // namespace

TEST_CASE("cudnn rnn plan (host): the algorithm rule", "[cuda_host]") {
  using kernels::cuda::choose_rnn_algo;
  RNNAlgoQuery q = sentiment(kFloat16);
  CHECK(choose_rnn_algo(q) == CudnnRNNAlgo::PersistStatic);
  CHECK(choose_rnn_algo(sentiment(kFloat32)) == CudnnRNNAlgo::Standard);  // PyTorch: float16 only
  CHECK(choose_rnn_algo(sentiment(kBFloat16)) == CudnnRNNAlgo::Standard);
  CHECK(choose_rnn_algo(sentiment(kFloat64)) == CudnnRNNAlgo::Standard);
  auto with = [](RNNAlgoQuery q, auto change) {
    change(q);
    return kernels::cuda::choose_rnn_algo(q);
  };
  // lstm-2x512: two layers.
  CHECK(with(q, [](RNNAlgoQuery& v) { v.num_layers = 2, v.input_size = 512, v.hidden_size = 512; }) ==
        CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.bidirectional = true; }) == CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.equal_lengths = false; }) == CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.input_size = 100; }) == CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.hidden_size = 1152; }) == CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.batch = 100; }) == CudnnRNNAlgo::Standard);   // not a multiple of 8
  CHECK(with(q, [](RNNAlgoQuery& v) { v.batch = 136; }) == CudnnRNNAlgo::Standard);   // over 128
  CHECK(with(q, [](RNNAlgoQuery& v) { v.batch = 128; }) == CudnnRNNAlgo::PersistStatic);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.mode = RNNMode::GRU; }) == CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.sm_minor = 6, v.sm_major = 8; }) == CudnnRNNAlgo::Standard);  // A40
  CHECK(with(q, [](RNNAlgoQuery& v) { v.sm_count = 56, v.sm_major = 8; }) == CudnnRNNAlgo::Standard);  // A30
  CHECK(with(q, [](RNNAlgoQuery& v) { v.sm_major = 8, v.sm_count = 108; }) == CudnnRNNAlgo::PersistStatic);
  // RNN tanh: not at 96 rows or more with 896 units or more.
  CHECK(with(q, [](RNNAlgoQuery& v) { v.mode = RNNMode::RNN_TANH, v.hidden_size = 1024, v.batch = 96; }) ==
        CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.mode = RNNMode::RNN_TANH, v.hidden_size = 1024, v.batch = 88; }) ==
        CudnnRNNAlgo::PersistStatic);
  // Volta: PyTorch's batch and length table; Turing never.
  CHECK(with(q, [](RNNAlgoQuery& v) { v.sm_major = 7, v.sm_count = 80, v.steps = 50; }) ==
        CudnnRNNAlgo::PersistStatic);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.sm_major = 7, v.sm_count = 80, v.steps = 15; }) == CudnnRNNAlgo::Standard);
  CHECK(with(q, [](RNNAlgoQuery& v) { v.sm_major = 7, v.sm_minor = 5; }) == CudnnRNNAlgo::Standard);
  // Small hidden sizes: training takes the backward's limits, inference the forward's.
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    RNNAlgoQuery s = sentiment(dtype);
    s.hidden_size = 128;
    CHECK(choose_rnn_algo(s) == CudnnRNNAlgo::PersistStaticSmallH);
    s.hidden_size = 160;
    CHECK(choose_rnn_algo(s) != CudnnRNNAlgo::PersistStaticSmallH);
    s.training = false;
    CHECK(choose_rnn_algo(s) == CudnnRNNAlgo::PersistStaticSmallH);
    s.hidden_size = 200;
    CHECK(choose_rnn_algo(s) != CudnnRNNAlgo::PersistStaticSmallH);
    s.mode = RNNMode::RNN_RELU;
    CHECK(choose_rnn_algo(s) == CudnnRNNAlgo::PersistStaticSmallH);  // 384 for RNN inference
    s.training = true;
    CHECK(choose_rnn_algo(s) == CudnnRNNAlgo::PersistStaticSmallH);  // 256 for RNN training
    s.hidden_size = 300;
    CHECK(choose_rnn_algo(s) != CudnnRNNAlgo::PersistStaticSmallH);
    s.hidden_size = 64;
    s.equal_lengths = false;
    CHECK(choose_rnn_algo(s) == CudnnRNNAlgo::Standard);
    s.equal_lengths = true;
    s.sm_major = 5;
    CHECK(choose_rnn_algo(s) == CudnnRNNAlgo::Standard);
  }
  RNNAlgoQuery d = sentiment(kFloat64);
  d.hidden_size = 32;
  CHECK(choose_rnn_algo(d) == CudnnRNNAlgo::Standard);
}

TEST_CASE("cudnn rnn plan (host): LOOM_CUDNN_RNN_ALGO's values and the tests' override", "[cuda_host]") {
  using kernels::cuda::parse_rnn_algo;
  CHECK_FALSE(parse_rnn_algo(nullptr));
  CHECK_FALSE(parse_rnn_algo(""));
  CHECK_FALSE(parse_rnn_algo("auto"));
  CHECK(parse_rnn_algo("standard") == CudnnRNNAlgo::Standard);
  CHECK(parse_rnn_algo("persist_static") == CudnnRNNAlgo::PersistStatic);
  CHECK(parse_rnn_algo("persist_static_small_h") == CudnnRNNAlgo::PersistStaticSmallH);
  CHECK_THROWS_AS(parse_rnn_algo("persistent"), ValueError);
  CHECK_THROWS_WITH(parse_rnn_algo("fast"), Catch::Contains("LOOM_CUDNN_RNN_ALGO") && Catch::Contains("'fast'"));
  // The tests' per-thread override, restored on leaving each scope.
  using kernels::cuda::forced_rnn_algo;
  REQUIRE_FALSE(forced_rnn_algo());
  {
    const kernels::cuda::ForceRNNAlgoGuard outer(CudnnRNNAlgo::PersistStatic);
    CHECK(forced_rnn_algo() == CudnnRNNAlgo::PersistStatic);
    {
      const kernels::cuda::ForceRNNAlgoGuard inner(CudnnRNNAlgo::Standard);
      CHECK(forced_rnn_algo() == CudnnRNNAlgo::Standard);
    }
    CHECK(forced_rnn_algo() == CudnnRNNAlgo::PersistStatic);
  }
  CHECK_FALSE(forced_rnn_algo());
  // An override applies where a persistent kernel may run, and never for float64 or
  // rows of unequal lengths, which run STANDARD whatever is forced.
  using kernels::cuda::rnn_algo_for;
  const RNNAlgoQuery q = sentiment(kFloat16);
  CHECK(rnn_algo_for(q, std::nullopt) == CudnnRNNAlgo::PersistStatic);
  CHECK(rnn_algo_for(q, CudnnRNNAlgo::PersistStaticSmallH) == CudnnRNNAlgo::PersistStaticSmallH);
  CHECK(rnn_algo_for(q, CudnnRNNAlgo::Standard) == CudnnRNNAlgo::Standard);
  CHECK(rnn_algo_for(sentiment(kFloat64), CudnnRNNAlgo::PersistStatic) == CudnnRNNAlgo::Standard);
  RNNAlgoQuery ragged = q;
  ragged.equal_lengths = false;
  CHECK(rnn_algo_for(ragged, CudnnRNNAlgo::PersistStaticSmallH) == CudnnRNNAlgo::Standard);
}

TEST_CASE("cudnn rnn plan (host): deterministic mode runs STANDARD whatever the rule or an override says",
          "[cuda_host][deterministic]") {
  using kernels::cuda::choose_rnn_algo;
  using kernels::cuda::rnn_algo_for;
  // Configurations for each algorithm the rule picks with the mode off.
  RNNAlgoQuery persist = sentiment(kFloat16), small_h = sentiment(kFloat32), standard = sentiment(kFloat32);
  small_h.hidden_size = 64;
  REQUIRE(choose_rnn_algo(persist) == CudnnRNNAlgo::PersistStatic);
  REQUIRE(choose_rnn_algo(small_h) == CudnnRNNAlgo::PersistStaticSmallH);
  REQUIRE(choose_rnn_algo(standard) == CudnnRNNAlgo::Standard);
  for (RNNAlgoQuery q : {persist, small_h, standard}) {
    const CudnnRNNAlgo off = choose_rnn_algo(q);
    INFO("the rule's choice with the mode off: " << kernels::cuda::rnn_algo_name(off));
    CHECK(rnn_algo_for(q, std::nullopt) == off);  // off: unchanged
    CHECK(rnn_algo_for(q, CudnnRNNAlgo::PersistStatic) == CudnnRNNAlgo::PersistStatic);
    q.deterministic = true;
    CHECK_FALSE(kernels::cuda::persistent_rnn_possible(q));
    CHECK(choose_rnn_algo(q) == CudnnRNNAlgo::Standard);
    CHECK(rnn_algo_for(q, std::nullopt) == CudnnRNNAlgo::Standard);
    for (CudnnRNNAlgo forced : {CudnnRNNAlgo::PersistStatic, CudnnRNNAlgo::PersistStaticSmallH})
      CHECK(rnn_algo_for(q, forced) == CudnnRNNAlgo::Standard);  // the environment's or a test's override
  }
  // Where the rule picks a persistent algorithm the mode changes the layer key (its algorithm):
  // no descriptor built with the mode off serves a call with it on.
  kernels::cuda::CudnnRNNLayerKey a, b;
  a.algo = rnn_algo_for(small_h, std::nullopt);
  small_h.deterministic = true;
  b.algo = rnn_algo_for(small_h, std::nullopt);
  CHECK_FALSE(a == b);
}

TEST_CASE("cudnn rnn plan (host): keys tell configurations apart, the LRU keeps the recent ones", "[cuda_host]") {
  kernels::cuda::CudnnRNNLayerKey a;
  a.input_size = 8;
  a.hidden_size = 16;
  kernels::cuda::CudnnRNNLayerKey b = a;
  CHECK(a == b);
  b.dtype = kFloat16;
  CHECK_FALSE(a == b);
  b = a;
  b.algo = CudnnRNNAlgo::PersistStatic;
  CHECK_FALSE(a == b);
  b = a;
  b.dropout_generation = 1;
  CHECK_FALSE(a == b);
  const kernels::cuda::CudnnRNNShapeKey s1{10, 4, {}, true}, s2{10, 4, {10, 3, 10, 1}, true}, s3{11, 4, {}, true};
  CHECK_FALSE(s1 == s2);
  CHECK_FALSE(s1 == s3);
  CHECK(s1 == kernels::cuda::CudnnRNNShapeKey{10, 4, {}, true});
  CHECK_FALSE(s1 == kernels::cuda::CudnnRNNShapeKey{10, 4, {}, false});

  kernels::cuda::LruCache<int, std::string> lru(2);
  lru.insert(1, "one");
  lru.insert(2, "two");
  REQUIRE(lru.find(1) != nullptr);  // 1 is now the most recent
  lru.insert(3, "three");           // drops 2
  CHECK(lru.find(2) == nullptr);
  REQUIRE(lru.find(1) != nullptr);
  CHECK(*lru.find(1) == "one");
  lru.insert(1, "uno");  // replaces
  CHECK(lru.size() == 2);
  CHECK(*lru.find(1) == "uno");
  lru.erase_if([](int k, const std::string&) { return k == 3; });
  CHECK(lru.size() == 1);
}

TEST_CASE("cudnn rnn plan (host): a weight stamp matches until the weight changes", "[cuda_host]") {
  using kernels::cuda::TensorStamp;
  Tensor w = randn({8, 4});
  const TensorStamp stamp = TensorStamp::of(w);
  CHECK(stamp.matches(w));
  CHECK(stamp.matches(w.detach()));        // another handle of the same memory (rnn_stack's)
  CHECK_FALSE(stamp.matches(w.clone()));   // equal values, other memory
  CHECK_FALSE(stamp.matches(w.slice(0, 1, 8)));  // a view at another offset
  CHECK_FALSE(stamp.matches(w.t()));
  {
    NoGradGuard no_grad;
    w.mul_(1.0);  // an in-place write, even one that changes nothing, bumps the version
  }
  CHECK_FALSE(stamp.matches(w));
  const TensorStamp after = TensorStamp::of(w);
  CHECK(after.matches(w));
  w.set_data(randn({8, 4}));  // Module::to's move: the same handle, new memory
  CHECK_FALSE(after.matches(w));
  CHECK(after.expired());  // nothing held the old memory: freed, and the stamp keeps nothing
  CHECK_FALSE(after.matches(randn({8, 4})));  // a new tensor, perhaps at the old address
  const TensorStamp none = TensorStamp::of(Tensor());
  CHECK(none.matches(Tensor()));
  CHECK_FALSE(none.matches(w));
  CHECK_FALSE(none.expired());
}

// ---- on a GPU --------------------------------------------------------------------------------

namespace {

kernels::cuda::CudnnRNNCounters counters() { return kernels::cuda::cudnn_rnn_counters(); }

// |a - b| <= tol · max|b| over the tensor (cuDNN and the CPU sum in other orders).
void check_same(const Tensor& a, const Tensor& b, const std::string& what, double tol = 1e-5) {
  INFO(what);
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> av = a.to(kCPU).to_vector<double>(), bv = b.to(kCPU).to_vector<double>();
  double scale = 0;
  for (double v : bv) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < av.size(); ++i) {
    INFO("element " << i << ": " << av[i] << " vs " << bv[i]);
    REQUIRE(std::abs(av[i] - bv[i]) <= tol * std::max(scale, 1e-30));
  }
}

}  // namespace

TEST_CASE("cuda: cuDNN plans and packed weights are reused until a parameter, dtype or shape changes",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDNN();
  manual_seed(21);
  // float64: STANDARD whatever the shape (Note [cuDNN RNN algorithm rule]), so that no
  // persistent algorithm's fallback builds plans of its own in between.
  nn::LSTM cpu(nn::RNNOptions(6, 13).num_layers(2));
  nn::LSTM gpu(nn::RNNOptions(6, 13).num_layers(2));
  cpu->to(kFloat64);
  gpu->to(kFloat64);
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(kCUDA);
  const Tensor x = test::random_nonzero({7, 3, 6}, kFloat64);  // (T, B, I)
  const Tensor xg = x.to(kCUDA);
  NoGradGuard no_grad;
  const auto c0 = counters();
  check_same(gpu(xg).output, cpu(x).output, "first forward", 1e-12);
  const auto c1 = counters();
  CHECK(c1.layer_plans == c0.layer_plans + 1);
  CHECK(c1.shape_plans == c0.shape_plans + 1);
  CHECK(c1.weight_packs == c0.weight_packs + 1);
  CHECK(c1.last_algo == CudnnRNNAlgo::Standard);
  // The same call again: nothing built, nothing packed.
  check_same(gpu(xg).output, cpu(x).output, "second forward", 1e-12);
  const auto c2 = counters();
  CHECK(c2.layer_plans == c1.layer_plans);
  CHECK(c2.shape_plans == c1.shape_plans);
  CHECK(c2.weight_packs == c1.weight_packs);
  CHECK(c2.weight_reuses == c1.weight_reuses + 1);
  // A parameter changed in place between calls: packed again, and the output follows it.
  gpu->named_parameters()[1].second.mul_(-0.5);  // weight_hh_l0
  cpu->named_parameters()[1].second.mul_(-0.5);
  check_same(gpu(xg).output, cpu(x).output, "after weight_hh_l0.mul_", 1e-12);
  const auto c3 = counters();
  CHECK(c3.weight_packs == c2.weight_packs + 1);
  CHECK(c3.layer_plans == c2.layer_plans);
  // A copy_ into a bias (what load_state_dict does): packed again.
  const TensorOptions f64 = TensorOptions(kFloat64);
  gpu->named_parameters()[7].second.copy_(full({52}, 0.25, f64.device(kCUDA)));  // bias_hh_l1
  cpu->named_parameters()[7].second.copy_(full({52}, 0.25, f64));
  check_same(gpu(xg).output, cpu(x).output, "after bias_hh_l1.copy_", 1e-12);
  CHECK(counters().weight_packs == c3.weight_packs + 1);
  // Another sequence length and batch: a new shape plan, the same layer plan and weights.
  const auto c4 = counters();
  const Tensor x2 = test::random_nonzero({4, 5, 6}, kFloat64);
  check_same(gpu(x2.to(kCUDA)).output, cpu(x2).output, "another shape", 1e-12);
  const auto c5 = counters();
  CHECK(c5.shape_plans == c4.shape_plans + 1);
  CHECK(c5.layer_plans == c4.layer_plans);
  CHECK(c5.weight_packs == c4.weight_packs);
  // Lengths: another shape plan; the first shape's plan is still cached.
  const Tensor lengths = from_vector<int64_t>({4, 2, 3, 1, 4}, {5});
  check_same(gpu(x2.to(kCUDA), nn::RNNState{}, lengths).output, cpu(x2, nn::RNNState{}, lengths).output, "lengths",
             1e-12);
  CHECK(counters().shape_plans == c5.shape_plans + 1);
  CHECK(counters().layer_plans == c5.layer_plans);
  const auto c6 = counters();
  check_same(gpu(xg).output, cpu(x).output, "the first shape again", 1e-12);
  CHECK(counters().shape_plans == c6.shape_plans);
  CHECK(counters().weight_packs == c6.weight_packs);
  // Another dtype: a new layer plan, new weights (at least one of each: a persistent
  // algorithm cuDNN refuses builds a STANDARD one too), the float32 result.
  gpu->to(kFloat32);
  cpu->to(kFloat32);
  const auto c7 = counters();
  check_same(gpu(xg.to(kFloat32)).output, cpu(x.to(kFloat32)).output, "float32");
  const auto c8 = counters();
  CHECK(c8.layer_plans > c7.layer_plans);
  CHECK(c8.weight_packs > c7.weight_packs);
}

TEST_CASE("cuda: cuDNN gradients with packed weights reused across forwards and refreshed by optimizer steps",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDNN();
  manual_seed(22);
  nn::GRU cpu(nn::RNNOptions(5, 9).bidirectional(true));
  nn::GRU gpu(nn::RNNOptions(5, 9).bidirectional(true));
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(kCUDA);
  const Tensor x1 = test::random_nonzero({6, 4, 5}), x2 = test::random_nonzero({6, 4, 5});
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    // Two forwards on the same weights (the second reuses the packed space), one backward.
    const auto c0 = counters();
    const Tensor loss_gpu = gpu(x1.to(kCUDA)).output.sum() + (gpu(x2.to(kCUDA)).output * 2).sum();
    CHECK(counters().weight_reuses == c0.weight_reuses + 1);
    const Tensor loss_cpu = cpu(x1).output.sum() + (cpu(x2).output * 2).sum();
    loss_gpu.backward();
    loss_cpu.backward();
    nn::NamedTensors pc = cpu->named_parameters(), pg = gpu->named_parameters();
    for (size_t k = 0; k < pc.size(); ++k) check_same(pg[k].second.grad(), pc[k].second.grad(), pc[k].first);
    // A plain SGD step in place: the next step's forwards pack the new values.
    NoGradGuard no_grad;
    for (size_t k = 0; k < pc.size(); ++k) {
      pc[k].second.sub_(pc[k].second.grad() * 0.1);
      pg[k].second.sub_(pg[k].second.grad() * 0.1);
      pc[k].second.mutable_grad() = Tensor();
      pg[k].second.mutable_grad() = Tensor();
    }
  }
}

