// Tensor: a cheap, reference-counted handle to a TensorImpl, with PyTorch's method API.
//
// Copying a Tensor copies the handle, not the data (as in PyTorch). Methods that return a
// Tensor record autograd history when an input requires grad and grad mode is on; the
// ones ending in '_' work in place and bump the version counter.
// The operators are implemented in autograd/functions/ (forward via kernels/, backward
// formulas beside them); metadata and data access in core/tensor.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"

namespace loom {

class Node;       // autograd/node.h
class Generator;  // core/generator.h

using Dims = std::vector<int64_t>;

// dtype, device and requires_grad for factories: zeros({2, 3}, kFloat64) or
// zeros({2, 3}, TensorOptions().device(kCUDA).requires_grad(true)).
struct TensorOptions {
  DType dtype_ = DType::Float32;
  Device device_ = kCPU;
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t) {}             // NOLINT: implicit, as in PyTorch
  TensorOptions(Device d) : device_(d) {}           // NOLINT
  TensorOptions(DeviceType d) : device_(d) {}       // NOLINT
  TensorOptions dtype(DType t) const { auto o = *this; o.dtype_ = t; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ---------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  int64_t size(int64_t dim) const;   // negative dims count from the end
  const Shape& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  int64_t storage_offset() const;
  int64_t element_size() const { return loom::element_size(dtype()); }
  size_t nbytes() const { return size_t(numel() * element_size()); }
  bool is_contiguous() const;
  bool is_floating_point() const { return loom::is_floating_point(dtype()); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  uint64_t version() const;
  void bump_version() const;  // after an in-place write
  // Makes this tensor use other's data, shape, dtype and device, keeping its own autograd
  // identity (requires_grad, grad, hooks): how Module::to(device) moves parameters while
  // every handle to them stays valid. other must not require grad.
  void set_data(const Tensor& other) const;

  // Pointer to the first element (offset applied). data_ptr<T> checks T against dtype.
  void* data() const;
  template <typename T>
  T* data_ptr() const {
    check_dtype_for_access(dtype_of<T>, "data_ptr");
    return static_cast<T*>(data());
  }
  // The single element of a one-element tensor (any device), converted to T.
  template <typename T>
  T item() const;
  Scalar item() const;
  // All elements in row-major order (any device, any strides), converted to T.
  template <typename T>
  std::vector<T> to_vector() const;
  std::string str() const;  // PyTorch-like repr

  // ---- autograd -----------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);  // leaves only
  Tensor& set_requires_grad(bool r) { return requires_grad_(r); }
  const Tensor& grad() const;   // undefined Tensor if none yet
  Tensor& mutable_grad() const;  // assignable: x.mutable_grad() = Tensor() clears it
  const std::shared_ptr<Node>& grad_fn() const;
  bool is_leaf() const;
  // gradient defaults to 1 for a scalar; a non-scalar needs one.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;   // same storage, no history
  Tensor& detach_();
  void retain_grad() const;  // keep .grad() on a non-leaf
  // fn(grad) runs when the gradient w.r.t. this tensor is computed; returning a defined
  // tensor replaces the gradient. Returns a handle for remove_hook.
  using Hook = std::function<Tensor(const Tensor&)>;
  int64_t register_hook(Hook fn) const;
  void remove_hook(int64_t handle) const;
  // Leaves only: fn(tensor) runs after the gradient was accumulated into tensor.grad().
  using PostAccumulateGradHook = std::function<void(const Tensor&)>;
  void register_post_accumulate_grad_hook(PostAccumulateGradHook fn) const;

  // ---- views (share storage) -----------------------------------------------------------
  Tensor view(const Shape& shape) const;     // one dim may be -1
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose
  Tensor permute(const Dims& dims) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const Dims& sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- copies and conversion -------------------------------------------------------------
  Tensor contiguous() const;  // this if already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;  // this if already that dtype
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(Device device, DType dtype) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0) const { return to(Device(DeviceType::CUDA, index)); }
  // Page-locked ("pinned") host memory, which GPU copies can read and write without the
  // host waiting: x.pin_memory().to(kCUDA, /*non_blocking=*/true). pin_memory() returns a
  // pinned, contiguous copy of a CPU tensor (this tensor if it is pinned already), without
  // autograd history; it needs the CUDA backend and a device (DeviceError otherwise).
  Tensor pin_memory() const;
  bool is_pinned() const;  // false in a build without CUDA
  Tensor float_() const { return to(kFloat32); }

  // ---- elementwise binary (broadcasting) --------------------------------------------------
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor add(Scalar other) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(Scalar other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;

  // ---- in place ----------------------------------------------------------------------------
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& add_(Scalar other);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(Scalar other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor& zero_();
  Tensor& fill_(Scalar value);
  Tensor& copy_(const Tensor& src, bool non_blocking = false);  // broadcasts src, casts dtype
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  // Random fills (use the global generator; see core/generator.h).
  Tensor& uniform_(double low = 0.0, double high = 1.0);
  Tensor& normal_(double mean = 0.0, double std = 1.0);

  // ---- elementwise unary ----------------------------------------------------------------------
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor silu() const;
  Tensor square() const { return mul(*this); }
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor logical_not() const;
  Tensor sign() const;
  // Bool masks of finite / NaN / infinite elements (integers are all finite), as torch.isfinite.
  Tensor isfinite() const;
  Tensor isnan() const;
  Tensor isinf() const;
  // NaN -> nan, +inf -> posinf, -inf -> neginf; an unset bound is the dtype's largest
  // (smallest) finite value, as torch.nan_to_num. Its gradient passes where x is finite.
  Tensor nan_to_num(double nan = 0.0, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt) const;

  // ---- reductions (dims may be negative; an empty Dims means all dims) ---------------------
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor sum(const Dims& dims, bool keepdim = false) const;
  // Whether every / any element is non-zero (true), as a 0-dim bool tensor.
  Tensor all() const;
  Tensor any() const;
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor mean(const Dims& dims, bool keepdim = false) const;
  Tensor max() const;  // of all elements
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // values, indices
  Tensor min() const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;  // flat index
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  // correction = 1 is the unbiased estimator (PyTorch's default).
  Tensor var(const Dims& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Dims& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor logsumexp(const Dims& dims, bool keepdim = false) const;
  Tensor logsumexp(int64_t dim, bool keepdim = false) const { return logsumexp(Dims{dim}, keepdim); }
  Tensor norm(double p = 2.0, const Dims& dims = {}, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;

  // ---- sorting (autograd/functions/sort.cpp; the order: Note [sort order], kernels/math/sort_math.h)
  // As torch.sort: stable (equal elements keep their order), NaN sorts as the largest.
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false, bool stable = true) const;
  Tensor argsort(int64_t dim = -1, bool descending = false, bool stable = true) const;
  // The k largest (or smallest) along dim, largest first (smallest first), with indices;
  // of equal values the lowest indices come first. ValueError unless 0 <= k <= size(dim).
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  // num_samples category indices (int64) per row of these non-negative weights (1-D, or
  // 2-D rows), as torch.multinomial; from `generator`, or the global one when null
  // (kernels/factories.cpp).
  Tensor multinomial(int64_t num_samples, bool replacement = false, Generator* generator = nullptr) const;

  // ---- linear algebra, softmax, indexing -------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  // As torch.bmm / baddbmm / addmm (autograd/functions/addmm.cpp): this (B, M, K) @ mat2
  // (B, K, N); beta * this + alpha * (batch1 @ batch2) with this broadcast to (B, M, N);
  // beta * this + alpha * (mat1 @ mat2) with this broadcast to (M, N).
  Tensor bmm(const Tensor& mat2) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta = 1, Scalar alpha = 1) const;
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta = 1, Scalar alpha = 1) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

 private:
  void check_dtype_for_access(DType requested, const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Operators, as in PyTorch. Comparisons return bool tensors.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// "(2, 3)" — the spelling of a shape in every error message.
std::string shape_str(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// A view of t's storage with other sizes/strides/offset, sharing its version counter,
// without autograd history (for kernels and for the views' own implementations).
Tensor alias_with(const Tensor& t, Shape sizes, Shape strides, int64_t offset);

}  // namespace loom
