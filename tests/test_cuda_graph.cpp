// CUDA graphs (core/cuda_graph.h, Note [CUDA graph capture]): capture on a side stream into
// a private pool, replay on new inputs, and the typed errors for what a capture cannot
// record. The pool's accounting is tested on the host in test_caching_allocator.cpp.
#include "cuda_test_util.h"
#include "test_util.h"

#include "core/cuda_graph.h"

using namespace loom;
using namespace loom::test;

TEST_CASE("cuda graph: without a usable GPU, capturing says why", "[cuda_api]") {
  if (cuda::is_available()) return;  // the [cuda] cases below
  cuda::CUDAGraph graph;
  const std::string why = built_with_cuda() ? "no CUDA device" : "built without CUDA";
  REQUIRE_THROWS_AS(graph.capture_begin(), DeviceError);
  REQUIRE_FALSE(graph.captured());
  REQUIRE_FALSE(graph.capturing());
  REQUIRE_THROWS_WITH(cuda::GraphCapture(graph), Catch::Contains(why));
  REQUIRE_THROWS_AS(graph.replay(), Error);
  REQUIRE_NOTHROW(graph.reset());
  REQUIRE_FALSE(cuda::is_current_stream_capturing());
  REQUIRE_NOTHROW(cuda::detail::check_not_capturing("anything"));
}

namespace {
// What the graphs below record: elementwise ops and a cuBLAS product, with temporaries.
Tensor step(const Tensor& x, const Tensor& w) { return ((x.matmul(w) + 1.0).relu() * 2.0 - x.exp().sum(1, true)); }
}  // namespace

TEST_CASE("cuda graph: a captured computation replayed on new inputs equals running it eagerly", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const Tensor w = random_nonzero({32, 32}).to(kCUDA);
  Tensor static_x = random_nonzero({16, 32}).to(kCUDA);
  (void)step(static_x, w);  // warm-up outside the capture: cuBLAS makes its handle and workspace
  cuda::synchronize();

  cuda::CUDAGraph graph;
  Tensor static_y;
  {
    cuda::GraphCapture capture(graph);
    REQUIRE(cuda::is_current_stream_capturing());
    REQUIRE(graph.capturing());
    static_y = step(static_x, w);
  }
  REQUIRE_FALSE(cuda::is_current_stream_capturing());
  REQUIRE(graph.captured());
  REQUIRE(graph.pool() != 0);

  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    const Tensor x = random_nonzero({16, 32}).to(kCUDA);
    static_x.copy_(x);  // a device-to-device copy, queued before the replay
    graph.replay();
    const Tensor eager = step(x, w);
    // The same kernels on the same values: equal, up to cuBLAS picking another algorithm.
    check_close(static_y.to(kCPU), eager.to(kCPU), "replayed step");
    check_close(static_y.to(kCPU), step(x.to(kCPU), w.to(kCPU)), "against the CPU");
  }
  graph.reset();
  REQUIRE_FALSE(graph.captured());
  REQUIRE_THROWS_AS(graph.replay(), ValueError);
}

TEST_CASE("cuda graph: capture memory comes from the graph's pool and goes back after reset", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const Tensor x = random_nonzero({256, 1024}).to(kCUDA);  // 1 MiB
  (void)(x * 2.0 + 1.0);
  cuda::synchronize();
  cuda::empty_cache();
  const size_t reserved_before = cuda::memory_reserved();
  const size_t allocated_before = cuda::memory_allocated();
  {
    cuda::CUDAGraph graph;
    Tensor y;
    {
      cuda::GraphCapture capture(graph);
      y = (x * 2.0 + 1.0) * x;  // a temporary, then y: both in the pool
    }
    REQUIRE(cuda::memory_allocated() >= allocated_before + x.nbytes());  // y lives
    REQUIRE(cuda::memory_reserved() > reserved_before);
    // The pool's free blocks are not the cache's to give back while the graph lives.
    const size_t reserved_with_graph = cuda::memory_reserved();
    cuda::empty_cache();
    REQUIRE(cuda::memory_reserved() == reserved_with_graph);
    graph.replay();
    check_close(y.to(kCPU), (x.to(kCPU) * 2.0 + 1.0) * x.to(kCPU), "replayed");
    y = Tensor();
  }  // the graph is destroyed: its pool's segments go back
  cuda::empty_cache();
  REQUIRE(cuda::memory_reserved() == reserved_before);
  REQUIRE(cuda::memory_allocated() == allocated_before);
}

TEST_CASE("cuda graph: what a capture cannot record is a CaptureError naming it, and nothing breaks", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const Tensor x = random_nonzero({64}).to(kCUDA);
  const double expected = (x.to(kCPU) * 3.0).sum().item<double>();
  (void)(x * 3.0).sum();
  cuda::synchronize();
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"to the host", [&] { (void)(x * 3.0).sum().item<float>(); }},
      {"cuda::synchronize", [] { cuda::synchronize(); }},
      {"multinomial", [&] { (void)multinomial(x.abs(), 4, /*replacement=*/true); }},
      {"the default generator", [&] {  // reseeded while capturing: not the capture's counters
         manual_seed(1234);
         (void)randn({64}, TensorOptions().device(kCUDA));
       }},
      {"from the host", [&] { (void)randn({4}).to(kCUDA); }},
      {"cuda::empty_cache", [] { cuda::empty_cache(); }},
  };
  for (const auto& [what, f] : cases) {
    INFO(what);
    cuda::CUDAGraph graph;
    try {
      cuda::GraphCapture capture(graph);
      f();
      FAIL("expected a CaptureError");
    } catch (const CaptureError& e) {
      CHECK_THAT(e.what(), Catch::Contains(what) && Catch::Contains("capturing a CUDA graph"));
    }
    REQUIRE_FALSE(graph.capturing());
    REQUIRE_FALSE(graph.captured());
    REQUIRE_FALSE(cuda::is_current_stream_capturing());
    // Usable afterwards: eager work and a new capture of the same graph.
    REQUIRE((x * 3.0).sum().item<double>() == Approx(expected).epsilon(1e-6));
    Tensor y;
    {
      cuda::GraphCapture capture(graph);
      y = (x * 3.0).sum();
    }
    graph.replay();
    REQUIRE(y.item<double>() == Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("cuda graph: the default stream cannot capture, and two graphs can share one pool", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  cuda::CUDAGraph lone;
  REQUIRE_THROWS_WITH(lone.capture_begin(), Catch::Contains("default stream"));
  REQUIRE_FALSE(lone.capturing());

  const Tensor a = random_nonzero({1000}).to(kCUDA);
  (void)(a + 1.0);
  cuda::CUDAGraph first, second;
  Tensor b, c;
  {
    cuda::GraphCapture capture(first);
    b = (a + 1.0) * a;
  }
  {
    cuda::GraphCapture capture(second, first.pool());  // replayed after `first`
    c = b.exp() - a;
  }
  REQUIRE(second.pool() == first.pool());
  // A captured graph must be reset before it captures again.
  REQUIRE_THROWS_WITH(cuda::GraphCapture(second), Catch::Contains("reset()"));
  REQUIRE_FALSE(cuda::is_current_stream_capturing());

  const Tensor a_cpu = a.to(kCPU), b_cpu = (a_cpu + 1.0) * a_cpu;
  for (int round = 0; round < 3; ++round) {
    b.fill_(0.0);
    c.fill_(0.0);
    first.replay();
    second.replay();
    check_close(b.to(kCPU), b_cpu, "first graph");
    check_close(c.to(kCPU), b_cpu.exp() - a_cpu, "second graph");
  }
  // The pool outlives the first graph while the second holds it.
  first.reset();
  b.fill_(0.5);
  second.replay();
  check_close(c.to(kCPU), full({1000}, 0.5).exp() - a_cpu, "second graph alone");
}

TEST_CASE("cuda graph: dropout and randn in a graph draw fresh numbers each replay, those of the eager steps",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const Tensor x = random_nonzero({4096}).to(kCUDA);
  const auto draw = [&] { return nn::functional::dropout(x, 0.5, true) + randn({4096}, TensorOptions().device(kCUDA)); };
  // Eagerly: four draws from seed 99.
  manual_seed(99);
  std::vector<Tensor> eager;
  for (int i = 0; i < 4; ++i) eager.push_back(draw().cpu());
  // Graphed: one eager draw, a capture (which draws nothing and reserves nothing), three replays.
  manual_seed(99);
  std::vector<Tensor> graphed = {draw().cpu()};
  const uint64_t before = default_generator().offset();
  cuda::CUDAGraph graph;
  Tensor out;
  {
    cuda::GraphCapture capture(graph);
    out = draw();
  }
  REQUIRE(default_generator().offset() == before);
  for (int i = 0; i < 3; ++i) {
    graph.replay();
    graphed.push_back(out.cpu());
  }
  for (size_t i = 0; i < eager.size(); ++i) {
    INFO("draw " << i);
    REQUIRE(graphed[i].to_vector<float>() == eager[i].to_vector<float>());
  }
  REQUIRE(graphed[1].to_vector<float>() != graphed[2].to_vector<float>());  // fresh numbers each replay
  // A reseed between replays takes effect at the next one, as an eager step's would.
  manual_seed(5);
  const Tensor reseeded_eager = draw().cpu();
  manual_seed(5);
  graph.replay();
  REQUIRE(out.cpu().to_vector<float>() == reseeded_eager.to_vector<float>());
}
