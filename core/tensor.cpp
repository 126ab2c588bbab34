// Tensor metadata and host access to elements.
#include "core/tensor.h"

#include <algorithm>

#include "core/allocator.h"
#include "core/checked_shape.h"
#include "core/cuda_emulation.h"
#include "core/factories.h"
#include "core/trace.h"

namespace loom {

namespace {
[[noreturn]] void throw_overflow(const Shape& sizes, const char* op) {
  throw ValueError(detail::str(op, ": shape ", shape_str(sizes),
                               " has too many elements: its size product overflows int64"));
}
}  // namespace

int64_t check_numel(const Shape& sizes, const char* op) {
  int64_t n = 1;  // the product counting 0 as 1
  bool empty = false;
  for (int64_t s : sizes) {
    if (s == 0) empty = true;
    else if (__builtin_mul_overflow(n, s, &n)) [[unlikely]] throw_overflow(sizes, op);
  }
  return empty ? 0 : n;
}

Shape contiguous_strides(const Shape& sizes, const char* op) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    if (__builtin_mul_overflow(s, std::max<int64_t>(sizes[d], 1), &s)) [[unlikely]] {
      // The outermost product is never used as a stride.
      if (d > 0) throw_overflow(sizes, op);
    }
  }
  return strides;
}

Shape contiguous_strides(const Shape& sizes) { return contiguous_strides(sizes, "contiguous_strides"); }

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Tensor alias_with(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  impl->version = base.impl()->version;
  impl->is_view = true;
  return Tensor(std::move(impl));
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  LOOM_CHECK(dim >= -n && dim < n, IndexError, op, ": dimension ", dim,
             " is out of range for a tensor of ", ndim, " dims (expected [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

#define LOOM_CHECK_DEFINED(what) \
  LOOM_CHECK(impl_ != nullptr, ValueError, what, ": called on an undefined tensor")

const Shape& Tensor::sizes() const {
  LOOM_CHECK_DEFINED("sizes");
  return impl_->sizes;
}
int64_t Tensor::size(int64_t dim) const {
  LOOM_CHECK_DEFINED("size");
  return impl_->sizes[size_t(wrap_dim(dim, this->dim(), "size"))];
}
const Shape& Tensor::strides() const {
  LOOM_CHECK_DEFINED("strides");
  return impl_->strides;
}
int64_t Tensor::stride(int64_t dim) const {
  LOOM_CHECK_DEFINED("stride");
  return impl_->strides[size_t(wrap_dim(dim, this->dim(), "stride"))];
}
int64_t Tensor::dim() const {
  LOOM_CHECK_DEFINED("dim");
  return int64_t(impl_->sizes.size());
}
int64_t Tensor::numel() const {
  LOOM_CHECK_DEFINED("numel");
  return impl_->numel();
}
DType Tensor::dtype() const {
  LOOM_CHECK_DEFINED("dtype");
  return impl_->dtype;
}
Device Tensor::device() const {
  LOOM_CHECK_DEFINED("device");
  return impl_->device;
}
int64_t Tensor::storage_offset() const {
  LOOM_CHECK_DEFINED("storage_offset");
  return impl_->offset;
}
uint64_t Tensor::version() const {
  LOOM_CHECK_DEFINED("version");
  return impl_->version ? impl_->version->value.load() : 0;
}
void Tensor::bump_version() const {
  LOOM_CHECK_DEFINED("bump_version");
  if (!impl_->version) impl_->version = std::make_shared<VersionCounter>();  // a hand-made TensorImpl
  impl_->version->value.fetch_add(1);
}

void Tensor::set_data(const Tensor& other) const {
  LOOM_CHECK_DEFINED("set_data");
  LOOM_CHECK(other.defined(), ValueError, "set_data: the new data is an undefined tensor");
  impl_->storage = other.impl_->storage;
  impl_->sizes = other.impl_->sizes;
  impl_->strides = other.impl_->strides;
  impl_->offset = other.impl_->offset;
  impl_->dtype = other.impl_->dtype;
  impl_->device = other.impl_->device;
  impl_->version = other.impl_->version;
}

bool Tensor::is_contiguous() const {
  LOOM_CHECK_DEFINED("is_contiguous");
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (impl_->sizes[d] == 1) continue;
    if (impl_->strides[d] != expected) return false;
    expected *= impl_->sizes[d];
  }
  return true;
}

void* Tensor::data() const {
  LOOM_CHECK_DEFINED("data");
  if (!impl_->storage || !impl_->storage->data()) return nullptr;
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * element_size();
}

bool Tensor::is_pinned() const {
  LOOM_CHECK_DEFINED("is_pinned");
  // Pinned storages come from the pinned allocator, which knows the blocks it handed out.
  return is_cpu() && impl_->storage && cuda::detail::is_pinned(impl_->storage->data());
}

Tensor Tensor::pin_memory() const {
  LOOM_CHECK_DEFINED("pin_memory");
  LOOM_CHECK(is_cpu(), DeviceError, "pin_memory: only CPU tensors can be pinned; this one is on ", device());
  if (is_pinned()) return *this;
  Allocator* pinned_allocator = cuda::detail::pinned_allocator();
  if (!pinned_allocator) {
    // The host-emulated device of a test build (core/cuda_emulation.h) needs no pinning: a
    // contiguous copy without history, as a real pin_memory() returns.
    LOOM_CHECK(cuda::emulated(), DeviceError,
               "pin_memory: Loom was built without CUDA support; pinned memory needs the CUDA backend");
    return detach().clone();
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = sizes();
  impl->strides = contiguous_strides(sizes());
  impl->dtype = dtype();
  impl->device = kCPU;
  impl->version = std::make_shared<VersionCounter>();
  impl->storage = std::make_shared<StorageImpl>(pinned_allocator->allocate(nbytes(), kCPU), nbytes());
  Tensor pinned(std::move(impl));
  pinned.copy_(detach());  // (neither side has history: nothing is recorded)
  return pinned;
}

void Tensor::check_dtype_for_access(DType requested, const char* what) const {
  LOOM_CHECK(requested == dtype(), DTypeError, what, ": requested ", dtype_name(requested),
             " from a tensor of dtype ", dtype_name(dtype()));
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  // A value read on the host while an export traces: control flow on the inputs' values cannot
  // be recorded (Note [op tracing]).
  if (trace::outside_ops()) [[unlikely]]
    trace::active()->kernel("to_vector/item (a value read on the host, as control flow on the inputs)", {this});
  Tensor host = to(kCPU).contiguous();
  std::vector<T> out(size_t(host.numel()));
  dispatch_all(host.dtype(), "to_vector", [&]<typename S>() {
    const S* p = static_cast<const S*>(host.data());
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) out[i] = float(opmath_t<S>(p[i])) != 0.0f;
      else out[i] = T(opmath_t<S>(p[i]));
    }
  });
  return out;
}

template <typename T>
T Tensor::item() const {
  LOOM_CHECK(numel() == 1, ValueError, "item: a tensor with ", numel(),
             " elements cannot be converted to a scalar; shape ", shape_str(sizes()));
  return to_vector<T>()[0];
}

Scalar Tensor::item() const {
  if (is_floating_point()) return Scalar(item<double>());
  if (dtype() == kBool) return Scalar(item<bool>());
  return Scalar(item<int64_t>());
}

#define LOOM_INSTANTIATE_ACCESS(T)                     \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
LOOM_INSTANTIATE_ACCESS(float)
LOOM_INSTANTIATE_ACCESS(double)
LOOM_INSTANTIATE_ACCESS(Half)
LOOM_INSTANTIATE_ACCESS(BFloat16)
LOOM_INSTANTIATE_ACCESS(int64_t)
LOOM_INSTANTIATE_ACCESS(int32_t)
LOOM_INSTANTIATE_ACCESS(bool)
#undef LOOM_INSTANTIATE_ACCESS

}  // namespace loom
