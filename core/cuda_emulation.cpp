// The host-emulated CUDA device (core/cuda_emulation.h): a switch, and an allocator that
// hands out host memory tagged with the CUDA device and counts it for the memory stats.
#include "core/cuda_emulation.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/allocator.h"
#include "core/error.h"

namespace loom::cuda {

namespace {

std::atomic<size_t> live_bytes{0}, peak_bytes{0};
std::atomic<uint64_t> syncs{0};

// Host blocks from the CPU allocator, re-tagged as cuda:0. The CPU DataPtr rides along in
// the deleter's context.
class EmulatedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_ASSERT(device.is_cuda());
    LOOM_CHECK(device.index == 0, DeviceError, "cannot allocate on ", device,
               ": the host-emulated CUDA device is cuda:0 only");
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);  // (no deleter runs for null)
    auto* block = new Block{get_allocator(DeviceType::CPU)->allocate(nbytes, kCPU), nbytes};
    const size_t live = live_bytes += nbytes;
    size_t peak = peak_bytes.load();
    while (live > peak && !peak_bytes.compare_exchange_weak(peak, live)) {
    }
    return DataPtr(block->host.get(), block, &release, device);
  }

 private:
  struct Block {
    DataPtr host;
    size_t bytes;
  };
  static void release(void* ctx, void*) {
    auto* block = static_cast<Block*>(ctx);
    live_bytes -= block->bytes;
    delete block;
  }
};

EmulatedAllocator emulated_allocator;

bool from_environment() {
  const char* v = std::getenv("LOOM_EMULATE_CUDA");
  if (!v || std::strcmp(v, "1") != 0) return false;
#ifdef LOOM_WITH_CUDA
  std::fprintf(stderr, "loom: LOOM_EMULATE_CUDA ignored: this build has the CUDA backend\n");
  return false;
#else
  std::fprintf(stderr, "loom: LOOM_EMULATE_CUDA=1: cuda:0 is emulated in host memory on the CPU kernels "
                       "(a test mode: no GPU is used)\n");
  return true;  // (core/cuda_stub.cpp then hands out emulation::allocator() for cuda:0)
#endif
}

std::atomic<bool>& state() {
  static std::atomic<bool> on{from_environment()};
  return on;
}

}  // namespace

bool emulated() { return state().load(std::memory_order_relaxed); }

EmulationGuard::EmulationGuard() : previous_(emulated()), previous_allocator_(get_allocator(DeviceType::CUDA)) {
#ifdef LOOM_WITH_CUDA
  throw DeviceError("cuda::EmulationGuard: this build has the CUDA backend; emulation is for builds without it");
#else
  state() = true;
  set_allocator(DeviceType::CUDA, &emulated_allocator);
#endif
}

EmulationGuard::~EmulationGuard() {
  state() = previous_;
  set_allocator(DeviceType::CUDA, previous_allocator_);
}

namespace emulation {
Allocator* allocator() { return &emulated_allocator; }
size_t allocated() { return live_bytes.load(); }
size_t max_allocated() { return peak_bytes.load(); }
void reset_peak() { peak_bytes = live_bytes.load(); }
void count_host_sync() { syncs.fetch_add(1, std::memory_order_relaxed); }
uint64_t host_syncs() { return syncs.load(std::memory_order_relaxed); }
}  // namespace emulation

}  // namespace loom::cuda
