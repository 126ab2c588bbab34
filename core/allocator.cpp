#include "core/allocator.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#include "core/error.h"
#include "core/storage.h"

namespace loom {
namespace {

// 64-byte alignment: one cache line, one AVX-512 register.
constexpr size_t kCpuAlignment = 64;

class CPUAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    LOOM_ASSERT(device.is_cpu());
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p) throw std::bad_alloc();
    return DataPtr(p, nullptr, [](void*, void* ptr) { std::free(ptr); }, device);
  }
};

CPUAllocator cpu_allocator;
std::array<std::atomic<Allocator*>, 2> allocators{&cpu_allocator, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) { return allocators[size_t(type)].load(); }

void set_allocator(DeviceType type, Allocator* allocator) { allocators[size_t(type)].store(allocator); }

Storage make_storage(size_t nbytes, Device device) {
  Allocator* a = get_allocator(device.type);
  LOOM_CHECK(a != nullptr, DeviceError, "cannot allocate on ", device,
             ": Loom was built without CUDA support (configure with the 'cuda' preset)");
  return std::make_shared<StorageImpl>(a->allocate(nbytes, device), nbytes);
}

}  // namespace loom
