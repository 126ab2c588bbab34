// The CUDA memory allocators: device memory through one caching allocator per device
// (core/caching_allocator.h over cudaMalloc), and page-locked host memory for
// Tensor::pin_memory() through a cache of cudaHostAlloc blocks. The memory statistics
// and empty_cache() of core/cuda.h are answered here.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/caching_allocator.h"
#include "core/cuda.h"
#include "core/cuda_graph.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/host_sync.h"

namespace loom::cuda {

namespace detail {
int checked_device(int index, const char* what);  // kernels/cuda/device.cpp
MempoolId capture_pool(int device);               // kernels/cuda/graph.cpp
bool capture_underway();
}  // namespace detail

using detail::checked_device;

namespace {

// ---- device memory ---------------------------------------------------------------------------

RawMemory device_memory(int device) {
  return RawMemory{
      [device](size_t bytes) -> void* {
        DeviceGuard guard(device);
        void* ptr = nullptr;
        // While this thread captures a graph, cudaMalloc is allowed in relaxed mode only; the
        // memory is fine to use in the graph as long as it is not freed before the graph
        // (Note [private pools]).
        cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        LOOM_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
        const cudaError_t status = cudaMalloc(&ptr, bytes);
        LOOM_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
        if (status == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();  // the caching allocator handles it (flush, retry, report)
          return nullptr;
        }
        LOOM_CUDA_CHECK(status);
        return ptr;
      },
      [device](void* ptr, size_t) {
        DeviceGuard guard(device);
        // A cached block may still be read by work queued before it was freed (its stream
        // reuses it in order, see Note [caching allocator design]): let that work finish.
        kernels::cuda::synchronize_device();
        LOOM_CUDA_CHECK(cudaFree(ptr));
      },
      [device]() -> size_t {
        DeviceGuard guard(device);
        size_t free = 0, total = 0;
        if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
          (void)cudaGetLastError();
          return std::numeric_limits<size_t>::max();  // "unknown" in the message
        }
        return free;
      },
      "CUDA",
      // cudaFree synchronizes the device, which would break a capture underway.
      [] { return !detail::capture_underway(); }};
}

// One caching allocator per device, made on first use and never destroyed: tensors held
// in static objects may be freed after main returns. `device` must be a checked index.
CachingAllocatorCore& device_cache(int device) {
  static const std::vector<CachingAllocatorCore*>* caches = [] {
    auto* v = new std::vector<CachingAllocatorCore*>;
    for (int d = 0; d < device_count(); ++d) v->push_back(new CachingAllocatorCore(device_memory(d)));
    return v;
  }();
  return *(*caches)[size_t(device)];
}

class CudaCachingAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_ASSERT(device.is_cuda());
    const int index = checked_device(device.index, "allocating CUDA memory");
    CachingAllocatorCore& cache = device_cache(index);
    // The block belongs to the stream current now: see Note [caching allocator design].
    const auto stream = reinterpret_cast<uintptr_t>(Stream::current(index).handle());
    // While this thread captures a graph, its blocks come from the graph's private pool.
    void* ptr = cache.allocate(nbytes, stream, nullptr, detail::capture_pool(index));
    return DataPtr(ptr, &cache, [](void* ctx, void* p) { static_cast<CachingAllocatorCore*>(ctx)->free(p); },
                   Device(DeviceType::CUDA, index));
  }
};

// ---- pinned host memory ----------------------------------------------------------------------

// Note [pinned memory cache]
// cudaHostAlloc is slow (it maps the pages for the device), so freed pinned blocks are
// kept, by size rounded up to a power of two, and reused. An asynchronous copy may still
// be reading or writing a block when its tensor is freed: transfer.cpp records an event
// after each such copy (record_use), and a block is handed out again only once all its
// events have completed.
class PinnedHostAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_ASSERT(device.is_cpu());
    checked_device(-1, "Tensor::pin_memory");
    detail::check_not_capturing("Tensor::pin_memory");
    const size_t size = std::bit_ceil(std::max(nbytes, kMinBlock));
    std::lock_guard<std::mutex> lock(mutex_);
    void* ptr = take_cached(size);
    if (!ptr) ptr = host_alloc(size);
    blocks_[ptr].in_use = true;
    return DataPtr(ptr, this, [](void* ctx, void* p) { static_cast<PinnedHostAllocator*>(ctx)->give_back(p); },
                   kCPU);
  }

  // Whether `ptr` is the start of a live pinned block.
  bool is_live_block(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(const_cast<void*>(ptr));
    return it != blocks_.end() && it->second.in_use;
  }

  // An asynchronous copy on `stream` uses the block at `ptr` (a no-op for other memory).
  // Called with the stream's device current.
  void record_use(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(const_cast<void*>(ptr));
    if (it == blocks_.end()) return;
    (void)idle(it->second);  // a block pinned for a whole run must not collect an event per copy
    cudaEvent_t event = nullptr;
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    it->second.pending.push_back(event);
    LOOM_CUDA_CHECK(cudaEventRecord(event, stream));
  }

 private:
  static constexpr size_t kMinBlock = 512;

  struct Block {
    size_t size = 0;
    bool in_use = false;
    std::vector<cudaEvent_t> pending;  // copies that may still use the block
  };

  // Deleter: no CUDA calls here (it may run after the runtime has shut down).
  void give_back(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    Block& block = blocks_.at(ptr);
    block.in_use = false;
    cached_[block.size].push_back(ptr);
  }

  // Drops the completed events (any of them: copies on several streams finish in any
  // order); true when none is left.
  bool idle(Block& block) {
    std::erase_if(block.pending, [](cudaEvent_t event) {
      const cudaError_t status = cudaEventQuery(event);
      if (status == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
      }
      LOOM_CUDA_CHECK(status);
      LOOM_CUDA_CHECK(cudaEventDestroy(event));
      return true;
    });
    return block.pending.empty();
  }

  void* take_cached(size_t size) {
    auto list = cached_.find(size);
    if (list == cached_.end()) return nullptr;
    for (auto it = list->second.begin(); it != list->second.end(); ++it) {
      if (!idle(blocks_.at(*it))) continue;
      void* ptr = *it;
      list->second.erase(it);
      return ptr;
    }
    return nullptr;
  }

  void* host_alloc(size_t size) {
    void* ptr = nullptr;
    cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocDefault);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached();
      status = cudaHostAlloc(&ptr, size, cudaHostAllocDefault);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw OutOfMemoryError("pinned host memory: cudaHostAlloc could not allocate " + format_bytes(size));
    }
    LOOM_CUDA_CHECK(status);
    blocks_[ptr].size = size;
    return ptr;
  }

  // Returns every cached block to the driver, waiting for copies still using them.
  void release_cached() {
    for (auto& [size, list] : cached_) {
      for (void* ptr : list) {
        for (cudaEvent_t event : blocks_.at(ptr).pending) {
          kernels::cuda::synchronize_event(event);
          LOOM_CUDA_CHECK(cudaEventDestroy(event));
        }
        blocks_.erase(ptr);
        LOOM_CUDA_CHECK(cudaFreeHost(ptr));
      }
      list.clear();
    }
  }

  std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;       // every block, live or cached
  std::map<size_t, std::vector<void*>> cached_;   // free blocks by size
};

// Never destroyed, like the device caches.
PinnedHostAllocator& pinned_host_allocator() {
  static auto* allocator = new PinnedHostAllocator;
  return *allocator;
}

}  // namespace

namespace detail {

// For core/allocator.h: the allocator of DeviceType::CUDA.
Allocator* device_allocator() {
  static CudaCachingAllocator allocator;  // stateless: its caches outlive it
  return &allocator;
}

// For core/tensor.cpp (Tensor::pin_memory, Tensor::is_pinned), declared in core/allocator.h.
Allocator* pinned_allocator() { return &pinned_host_allocator(); }
bool is_pinned(const void* ptr) { return ptr && pinned_host_allocator().is_live_block(ptr); }

// For kernels/cuda/transfer.cpp: an asynchronous copy on `stream` uses the pinned block at
// `ptr`; it will not be reused before the copy is done.
void record_pinned_use(const void* ptr, void* stream) {
  pinned_host_allocator().record_use(ptr, static_cast<cudaStream_t>(stream));
}

}  // namespace detail

// ---- core/cuda.h: memory statistics -----------------------------------------------------------

size_t memory_allocated(int index) {
  return device_cache(checked_device(index, "cuda::memory_allocated")).stats().allocated;
}
size_t max_memory_allocated(int index) {
  return device_cache(checked_device(index, "cuda::max_memory_allocated")).stats().max_allocated;
}
size_t memory_reserved(int index) {
  return device_cache(checked_device(index, "cuda::memory_reserved")).stats().reserved;
}
size_t max_memory_reserved(int index) {
  return device_cache(checked_device(index, "cuda::max_memory_reserved")).stats().max_reserved;
}
void reset_peak_memory_stats(int index) {
  device_cache(checked_device(index, "cuda::reset_peak_memory_stats")).reset_peak_stats();
}

// For kernels/cuda/graph.cpp: the private pools of CUDA graphs (Note [private pools]).
namespace detail {
MempoolId create_graph_pool(int device) { return device_cache(device).create_pool(); }
void retain_graph_pool(int device, MempoolId pool) { device_cache(device).retain_pool(pool); }
void release_graph_pool(int device, MempoolId pool) { device_cache(device).release_pool(pool); }
}  // namespace detail

// Every device's cache, as torch.cuda.empty_cache(); nothing to do without a device.
void empty_cache() {
  detail::check_not_capturing("cuda::empty_cache");
  for (int d = 0; d < device_count(); ++d) device_cache(d).empty_cache();
}

}  // namespace loom::cuda
