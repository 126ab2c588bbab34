// The device API (core/cuda.h): what a build without CUDA answers, and on a GPU what
// torch.cuda's counterparts do. The "[.cuda]" cases skip themselves without a GPU.
#include "cuda_test_util.h"
#include "test_util.h"

using namespace loom;

TEST_CASE("cuda API: without a usable GPU nothing is available and uses say why", "[cuda_api]") {
  if (cuda::is_available()) return;  // covered by the [cuda] cases below
  REQUIRE(cuda::device_count() == 0);
  const std::string why = built_with_cuda() ? "no CUDA device" : "built without CUDA";
  REQUIRE_THROWS_WITH(cuda::memory_allocated(), Catch::Contains(why) && Catch::Contains("memory_allocated"));
  REQUIRE_THROWS_AS(cuda::synchronize(), DeviceError);
  REQUIRE_THROWS_AS(cuda::DeviceGuard(0), DeviceError);
  REQUIRE_NOTHROW(cuda::DeviceGuard(kCPU));
  REQUIRE_THROWS_AS(cuda::Stream::create(), DeviceError);
  REQUIRE_THROWS_AS(cuda::Event(), DeviceError);
  REQUIRE_NOTHROW(cuda::empty_cache());
  // Tensors: moving one to a GPU, or creating one there, is a DeviceError that says why.
  Tensor x = randn({3});
  REQUIRE_THROWS_WITH(x.to(kCUDA), Catch::Contains(why));
  REQUIRE_THROWS_AS(zeros({2}, TensorOptions().device(kCUDA)), DeviceError);
}

TEST_CASE("cuda API: TF32 for matmuls is off by default and switchable", "[cuda_api]") {
  REQUIRE_FALSE(cuda::allow_tf32());
  cuda::set_allow_tf32(true);
  REQUIRE(cuda::allow_tf32());
  cuda::set_allow_tf32(false);
  REQUIRE_FALSE(cuda::allow_tf32());
}

TEST_CASE("cuda API: devices, guards and memory statistics", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  REQUIRE(cuda::device_count() >= 1);
  REQUIRE_FALSE(cuda::device_name(0).empty());
  REQUIRE_THROWS_AS(cuda::device_name(cuda::device_count()), DeviceError);
  {
    cuda::DeviceGuard guard(0);
    REQUIRE(cuda::current_device() == 0);
  }
  cuda::synchronize();
  cuda::empty_cache();
  cuda::reset_peak_memory_stats();
  const size_t before = cuda::memory_allocated();
  {
    Tensor t = empty({1 << 20}, TensorOptions().device(kCUDA));  // 4 MiB
    REQUIRE(cuda::memory_allocated() >= before + (4u << 20));
    REQUIRE(cuda::memory_reserved() >= cuda::memory_allocated());
  }
  REQUIRE(cuda::memory_allocated() == before);
  REQUIRE(cuda::max_memory_allocated() >= before + (4u << 20));
  REQUIRE(cuda::memory_reserved() >= (4u << 20));  // cached, not returned
  cuda::empty_cache();
  cuda::reset_peak_memory_stats();
  REQUIRE(cuda::max_memory_allocated() == cuda::memory_allocated());
}

TEST_CASE("cuda API: streams and events order work and time it", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  cuda::Stream side = cuda::Stream::create();
  REQUIRE_FALSE(side == cuda::Stream::default_stream());
  cuda::Event start(true), stop(true);
  Tensor a = randn({1 << 20}).to(kCUDA), b;
  {
    cuda::StreamGuard guard(side);
    REQUIRE(cuda::Stream::current() == side);
    start.record();
    b = a * 2.0;
    stop.record();
  }
  REQUIRE(cuda::Stream::current() == cuda::Stream::default_stream());
  stop.wait();  // the default stream waits for the side stream's work
  stop.synchronize();
  REQUIRE(stop.query());
  REQUIRE(start.elapsed_ms(stop) >= 0.0f);
  test::check_close(b.cpu(), test::values(a.cpu() * 2.0), kFloat32, "a * 2 on a side stream");
}
