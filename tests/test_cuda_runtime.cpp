// The CUDA runtime layer: host <-> device transfers, pinned memory, the caching
// allocator on a real device (out of memory, empty_cache, streams), device guards, and
// the typed errors of kernels/cuda/check.h. The "[.cuda]" cases skip themselves without a
// GPU; the "[allocator]" ones run everywhere and check what a machine without one says.
#include "cuda_test_util.h"
#include "test_util.h"

#include "kernels/kernels.h"

#ifdef LOOM_WITH_CUDA
#include <cublas_api.h>
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#endif

using namespace loom;

namespace {

constexpr size_t MiB = size_t(1) << 20;

// Random values of every dtype: floats rounded through the dtype, ints in [-1000, 1000),
// bools half true.
Tensor random_of(DType dtype, const Shape& shape) {
  if (dtype == kBool) return rand(shape) > 0.5;
  if (is_floating_point(dtype)) return randn(shape).to(dtype);
  return randint(-1000, 1000, shape, dtype);
}

const DType kAllDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

}  // namespace

TEST_CASE("cuda runtime: without a usable GPU, pinning memory says why", "[allocator]") {
  if (cuda::is_available()) return;  // covered by the [cuda] cases below
  Tensor x = randn({4});
  REQUIRE_FALSE(x.is_pinned());
  const std::string why = built_with_cuda() ? "no CUDA device" : "built without CUDA";
  REQUIRE_THROWS_AS(x.pin_memory(), DeviceError);
  REQUIRE_THROWS_WITH(x.pin_memory(), Catch::Contains(why) && Catch::Contains("pin_memory"));
  REQUIRE_FALSE(x.is_pinned());
}

#ifdef LOOM_WITH_CUDA
TEST_CASE("cuda runtime: failed CUDA calls throw typed errors naming the call", "[allocator]") {
  using cuda::detail::throw_cuda_error;
  try {
    throw_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "grow", "pool.cpp", 42);
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    REQUIRE(std::string(e.what()) ==
            std::string("cudaMalloc(&p, n) failed in grow (pool.cpp:42): cudaErrorMemoryAllocation: ") +
                cudaGetErrorString(cudaErrorMemoryAllocation));
  }
  REQUIRE_THROWS_AS(throw_cuda_error(cudaErrorNoDevice, "f()", "g", "h.cpp", 1), DeviceError);
  REQUIRE_THROWS_AS(throw_cuda_error(cudaErrorInsufficientDriver, "f()", "g", "h.cpp", 1), DeviceError);
  REQUIRE_THROWS_AS(throw_cuda_error(cudaErrorInvalidDevice, "f()", "g", "h.cpp", 1), DeviceError);
  REQUIRE_THROWS_AS(throw_cuda_error(cudaErrorInvalidValue, "f()", "g", "h.cpp", 1), CudaError);
  REQUIRE_THROWS_WITH(throw_cuda_error(cudaErrorInvalidValue, "f()", "g", "h.cpp", 1),
                      Catch::Contains("cudaErrorInvalidValue"));

  // Through the macro, with a real call: a device index no machine has. Without a driver
  // the runtime says so instead; both are device errors.
  auto bad_device = [] { LOOM_CUDA_CHECK(cudaSetDevice(12345)); };
  REQUIRE_THROWS_AS(bad_device(), DeviceError);
  REQUIRE_THROWS_WITH(bad_device(),
                      Catch::Contains("cudaSetDevice(12345) failed in") && Catch::Contains("test_cuda_runtime.cpp:"));
  // The failure was not left behind for the next check. (Without a driver every call keeps
  // failing, so there is nothing to clear.)
  if (cuda::is_available()) REQUIRE(cudaGetLastError() == cudaSuccess);

  REQUIRE_THROWS_AS(cuda::detail::throw_cublas_error(CUBLAS_STATUS_ALLOC_FAILED, "cublasCreate(&h)", "g", "h.cpp", 1),
                    OutOfMemoryError);
  REQUIRE_THROWS_WITH(cuda::detail::throw_cublas_error(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm()", "g", "h.cpp", 1),
                      Catch::Contains("cublasSgemm() failed in g (h.cpp:1): CUBLAS_STATUS_INVALID_VALUE"));
  REQUIRE_THROWS_AS(cuda::detail::throw_cublas_error(CUBLAS_STATUS_INVALID_VALUE, "f()", "g", "h.cpp", 1), CudaError);
  REQUIRE_THROWS_WITH(cuda::detail::throw_cudnn_error(2000, "cudnnConv()", "g", "h.cpp", 1),
                      Catch::Contains("cudnnConv() failed in g (h.cpp:1): cuDNN status 2000"));
}
#endif

TEST_CASE("cuda runtime: to(cuda) and back keeps the values of every dtype", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(7);
  for (DType dtype : kAllDTypes) {
    INFO(dtype_name(dtype));
    Tensor x = random_of(dtype, {37, 129});
    const size_t before = cuda::memory_allocated();
    Tensor g = x.to(kCUDA);
    REQUIRE(g.is_cuda());
    REQUIRE(g.dtype() == dtype);
    REQUIRE(g.sizes() == x.sizes());
    REQUIRE(cuda::memory_allocated() >= before + x.nbytes());
    Tensor back = g.cpu();
    REQUIRE(back.is_cpu());
    REQUIRE(back.to_vector<double>() == x.to_vector<double>());
    // A non-contiguous source is made contiguous first; the element order is kept.
    REQUIRE(x.t().cuda().cpu().to_vector<double>() == x.t().to_vector<double>());
  }
  // Empty tensors travel too.
  Tensor none = empty({0, 3}).to(kCUDA);
  REQUIRE(none.is_cuda());
  REQUIRE(none.cpu().numel() == 0);
}

TEST_CASE("cuda runtime: pinned memory and non-blocking copies", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(11);
  Tensor x = randn({1000});
  REQUIRE_FALSE(x.is_pinned());
  Tensor p = x.pin_memory();
  REQUIRE(p.is_pinned());
  REQUIRE(p.is_cpu());
  REQUIRE(p.to_vector<float>() == x.to_vector<float>());
  REQUIRE(p.pin_memory().is_same(p));         // already pinned
  REQUIRE(p.slice(0, 10, 20).is_pinned());    // views share the pinned storage
  REQUIRE_FALSE(p.clone().is_pinned());
  Tensor y = randn({8, 16});
  Tensor yt = y.t().pin_memory();             // a non-contiguous source: a contiguous copy
  REQUIRE(yt.is_pinned());
  REQUIRE(yt.is_contiguous());
  REQUIRE(yt.to_vector<float>() == y.t().to_vector<float>());
  REQUIRE_THROWS_AS(x.to(kCUDA).pin_memory(), DeviceError);

  // Host -> device without waiting: each pinned staging tensor is dropped at once, and the
  // next pin_memory() of the same size must not reuse its block while the copy still reads it.
  constexpr int kBatches = 8;
  std::vector<Tensor> sources, on_gpu;
  for (int i = 0; i < kBatches; ++i) {
    sources.push_back(randn({1 << 18}));  // 1 MiB
    on_gpu.push_back(sources.back().pin_memory().to(kCUDA, /*non_blocking=*/true));
  }
  cuda::synchronize();
  for (int i = 0; i < kBatches; ++i) {
    INFO("batch " << i);
    REQUIRE(on_gpu[i].cpu().to_vector<float>() == sources[i].to_vector<float>());
  }

  // Device -> pinned host without waiting: the values are there after a stream sync.
  Tensor host = empty({1 << 18}).pin_memory();
  kernels::copy_across_devices(host, on_gpu[3], /*non_blocking=*/true);
  cuda::Stream::current().synchronize();
  REQUIRE(host.to_vector<float>() == sources[3].to_vector<float>());
  // Into pageable memory non_blocking is ignored: the copy is complete on return.
  Tensor pageable = empty({1 << 18});
  kernels::copy_across_devices(pageable, on_gpu[5], /*non_blocking=*/true);
  REQUIRE(pageable.to_vector<float>() == sources[5].to_vector<float>());
}

TEST_CASE("cuda runtime: an impossible allocation is an OutOfMemoryError and nothing breaks", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const size_t allocated = cuda::memory_allocated();
  try {
    Tensor huge = empty({int64_t(1) << 48}, TensorOptions().device(kCUDA));  // 1 PiB of float32
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("CUDA out of memory") != std::string::npos);
    CHECK(msg.find("tried to allocate 1.00 PiB (1125899906842624 bytes)") != std::string::npos);
    CHECK(msg.find("allocated by Loom") != std::string::npos);
    CHECK(msg.find("reserved") != std::string::npos);
    CHECK(msg.find("free on the device") != std::string::npos);
  }
  REQUIRE(cuda::memory_allocated() == allocated);
  Tensor x = randn({1 << 18});
  REQUIRE(x.to(kCUDA).cpu().to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("cuda runtime: empty_cache returns cached segments to the driver", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  cuda::empty_cache();
  const size_t reserved = cuda::memory_reserved();
  const size_t allocated = cuda::memory_allocated();
  {
    Tensor t = empty({16 << 20}, TensorOptions().device(kCUDA));  // 64 MiB
    REQUIRE(cuda::memory_allocated() == allocated + 64 * MiB);
    REQUIRE(cuda::memory_reserved() == reserved + 64 * MiB);
  }
  REQUIRE(cuda::memory_allocated() == allocated);
  REQUIRE(cuda::memory_reserved() == reserved + 64 * MiB);  // cached
  cuda::empty_cache();
  REQUIRE(cuda::memory_reserved() == reserved);
  REQUIRE(cuda::max_memory_reserved() >= reserved + 64 * MiB);
}

TEST_CASE("cuda runtime: device guards switch and restore the current device", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  const int n = cuda::device_count();
  cuda::set_device(0);
  REQUIRE(cuda::current_device() == 0);
  {
    cuda::DeviceGuard guard(kCPU);
    REQUIRE(cuda::current_device() == 0);
  }
  {
    cuda::DeviceGuard guard(n - 1);
    REQUIRE(cuda::current_device() == n - 1);
    Tensor t = empty({4}, TensorOptions().device(Device(DeviceType::CUDA, n - 1)));
    REQUIRE(t.device().index == n - 1);
    REQUIRE(cuda::memory_allocated(n - 1) >= 512);
  }
  REQUIRE(cuda::current_device() == 0);
  REQUIRE_THROWS_WITH(cuda::DeviceGuard(n),
                      Catch::Contains("device index " + std::to_string(n)) && Catch::Contains("out of range"));
  REQUIRE_THROWS_AS(cuda::set_device(-5), DeviceError);
  REQUIRE_THROWS_AS(cuda::memory_allocated(n), DeviceError);
  REQUIRE_THROWS_AS(empty({4}, TensorOptions().device(Device(DeviceType::CUDA, n))), DeviceError);
  REQUIRE(cuda::current_device() == 0);
}

TEST_CASE("cuda runtime: a block freed on one stream is not reused on another", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  cuda::empty_cache();
  void* first = nullptr;
  {
    Tensor a = empty({1 << 18}, TensorOptions().device(kCUDA));  // 1 MiB, on the default stream
    first = a.data();
  }
  cuda::Stream side = cuda::Stream::create();
  {
    cuda::StreamGuard guard(side);
    Tensor b = empty({1 << 18}, TensorOptions().device(kCUDA));
    REQUIRE(b.data() != first);
  }
  Tensor c = empty({1 << 18}, TensorOptions().device(kCUDA));
  REQUIRE(c.data() == first);
}
