// The factories declared in core/factories.h (as the tensor API is declared in
// core/tensor.h), defined here beside the fill and random kernels they call.
#include "core/factories.h"

#include <cmath>
#include <limits>

#include "core/checked_shape.h"
#include "core/trace.h"
#include "kernels/kernels.h"

namespace loom {
namespace {

// An uninitialised contiguous tensor of shape; errors name op (Note [checked shape
// arithmetic]): a negative size is a ShapeError, a count or byte size past int64 a
// ValueError, and more bytes than the device has an OutOfMemoryError from its allocator.
// The element count of shape, checked.
int64_t check_shape(const Shape& shape, const char* op) {
  for (int64_t s : shape)
    LOOM_CHECK(s >= 0, ShapeError, op, ": negative dimension in shape ", shape_str(shape));
  return check_numel(shape, op);
}

Tensor make_empty(const Shape& shape, const TensorOptions& options, const char* op) {
  const int64_t n = check_shape(shape, op);
  auto impl = std::make_shared<TensorImpl>();
  int64_t nbytes = 0;
  LOOM_CHECK(!__builtin_mul_overflow(n, int64_t(element_size(options.dtype_)), &nbytes), ValueError, op,
             ": shape ", shape_str(shape), " of ", dtype_name(options.dtype_), " needs more than ",
             std::numeric_limits<int64_t>::max(), " bytes");
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape, op);
  impl->dtype = options.dtype_;
  impl->device = options.device_;
  impl->version = std::make_shared<VersionCounter>();
  impl->storage = make_storage(size_t(nbytes), options.device_);
  return Tensor(std::move(impl));
}

// A tensor filled on the host, on `device`: to a GPU through pinned memory, queued, so that
// the host does not wait for the GPU to reach the copy (small uploads such as positions and
// sequence lengths happen every step).
Tensor upload(const Tensor& host, Device device) {
  if (device.is_cuda()) return host.pin_memory().to(device, /*non_blocking=*/true);
  return host.to(device);
}

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor make_full(const Shape& shape, Scalar value, const TensorOptions& options, const char* op) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h)
  Tensor t = make_empty(shape, options, op);
  kernels::fill(t, value);
  t = finish(t, options);
  if (trace) trace.record({"full", {}, {t}, shape, {value.to_double()}});  // sizes may be an input's
  return t;
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  return finish(make_empty(shape, options, "empty"), options);
}

Tensor full(const Shape& shape, Scalar value, TensorOptions options) {
  return make_full(shape, value, options, "full");
}

Tensor zeros(const Shape& shape, TensorOptions options) { return make_full(shape, 0, options, "zeros"); }
Tensor ones(const Shape& shape, TensorOptions options) { return make_full(shape, 1, options, "ones"); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.options()); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, t.options()); }
Tensor scalar_tensor(Scalar value, TensorOptions options) { return full({}, value, options); }

Tensor arange(Scalar end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
  const trace::OpScope trace;  // Note [op tracing] (core/trace.h): the end may be an input's size
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  LOOM_CHECK(st != 0, ValueError, "arange: step must be non-zero");
  LOOM_CHECK((e - s) * st >= 0, ValueError, "arange: range [", s, ", ", e,
             ") is empty or inconsistent with step ", st);
  if (!start.is_integral() || !end.is_integral() || !step.is_integral()) {
    if (options.dtype_ == kInt64) options = options.dtype(kFloat32);
  }
  // The count: exact for integers (int64 bounds can span 2^64), else in double; it must
  // fit in int64 either way (a double past it does not even convert).
  constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();
  int64_t n = 0;
  if (start.is_integral() && end.is_integral() && step.is_integral()) {
    const __int128 span = __int128(end.to_int()) - start.to_int(), by = step.to_int();
    const __int128 count = (span + (by > 0 ? by - 1 : by + 1)) / by;
    LOOM_CHECK(count <= kMaxCount, ValueError, "arange: [", start.to_int(), ", ", end.to_int(), ") in steps of ",
               step.to_int(), " has more than ", kMaxCount, " elements");
    n = int64_t(count);
  } else {
    const double count = std::ceil((e - s) / st);
    LOOM_CHECK(count < 0x1p63, ValueError, "arange: [", s, ", ", e, ") in steps of ", st, " has ", count,
               " elements, more than ", kMaxCount);
    n = int64_t(count);
  }
  Tensor host = make_empty({n}, TensorOptions(options.dtype_), "arange");
  dispatch_numeric(options.dtype_, "arange", [&]<typename T>() {
    T* p = host.data_ptr<T>();
    if constexpr (std::is_integral_v<T>) {
      // start + i * step in uint64, whose wrap-around is exact: every value lies in [start, end).
      const uint64_t first = uint64_t(start.to_int()), by = uint64_t(step.to_int());
      for (int64_t i = 0; i < n; ++i) p[i] = T(int64_t(first + uint64_t(i) * by));
    } else {  // no to_int here: a floating range may lie beyond int64 (arange(0., 4e19, 1e19))
      for (int64_t i = 0; i < n; ++i) p[i] = T(s + double(i) * st);
    }
  });
  Tensor out = finish(upload(host, options.device_), options);
  if (trace) trace.record({"arange", {}, {out}, {}, {s, e, st}});
  return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  LOOM_CHECK(steps >= 0, ValueError, "linspace: steps must be non-negative, got ", steps);
  Tensor host = make_empty({steps}, TensorOptions(options.dtype_), "linspace");
  const double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  dispatch_numeric(options.dtype_, "linspace", [&]<typename T>() {
    T* p = host.data_ptr<T>();
    // Fill from both ends, as PyTorch does, so the last value is exactly `end` (one step
    // gives `start`).
    for (int64_t i = 0; i < steps; ++i)
      p[i] = T(steps == 1 || i < steps / 2 ? start + step * double(i) : end - step * double(steps - 1 - i));
  });
  return finish(upload(host, options.device_), options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
  const int64_t n = check_shape(shape, "from_vector");
  LOOM_CHECK(n == int64_t(values.size()), ShapeError, "from_vector: ", values.size(),
             " values cannot fill shape ", shape_str(shape), " (", n, " elements)");
  Tensor host = make_empty(shape, TensorOptions(dtype_of<T>), "from_vector");
  std::copy(values.begin(), values.end(), host.data_ptr<T>());
  Tensor t = host;
  if (options.dtype_ != dtype_of<T>) t = t.to(options.dtype_);
  return finish(upload(t, options.device_), options);
}

#define LOOM_INSTANTIATE_FROM_VECTOR(T) \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, TensorOptions);
LOOM_INSTANTIATE_FROM_VECTOR(float)
LOOM_INSTANTIATE_FROM_VECTOR(double)
LOOM_INSTANTIATE_FROM_VECTOR(Half)
LOOM_INSTANTIATE_FROM_VECTOR(BFloat16)
LOOM_INSTANTIATE_FROM_VECTOR(int64_t)
LOOM_INSTANTIATE_FROM_VECTOR(int32_t)
LOOM_INSTANTIATE_FROM_VECTOR(bool)
#undef LOOM_INSTANTIATE_FROM_VECTOR

// ---- random ---------------------------------------------------------------------------

namespace {
// Philox blocks reserved for n elements: two words each, four words a block.
uint64_t blocks_for(int64_t n) { return uint64_t(n) / 2 + uint64_t(n) % 2; }
}  // namespace

Tensor& Tensor::uniform_(double low, double high) {
  LOOM_CHECK(low <= high, ValueError, "uniform_: low ", low, " > high ", high);
  LOOM_CHECK(is_floating_point(), DTypeError, "uniform_: expected a floating-point tensor, got ",
             dtype_name(dtype()));
  Generator& g = default_generator();
  kernels::uniform(*this, low, high, g.seed(), g.reserve(blocks_for(numel())));
  bump_version();
  return *this;
}

Tensor& Tensor::normal_(double mean, double std) {
  LOOM_CHECK(std >= 0, ValueError, "normal_: std must be non-negative, got ", std);
  LOOM_CHECK(is_floating_point(), DTypeError, "normal_: expected a floating-point tensor, got ",
             dtype_name(dtype()));
  Generator& g = default_generator();
  kernels::normal(*this, mean, std, g.seed(), g.reserve(blocks_for(numel())));
  bump_version();
  return *this;
}

Tensor rand(const Shape& shape, TensorOptions options) {
  Tensor t = make_empty(shape, options, "rand");
  t.uniform_(0.0, 1.0);
  return finish(t, options);
}

Tensor randn(const Shape& shape, TensorOptions options) {
  Tensor t = make_empty(shape, options, "randn");
  t.normal_(0.0, 1.0);
  return finish(t, options);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options) {
  LOOM_CHECK(low < high, ValueError, "randint: expected low < high, got [", low, ", ", high, ")");
  // The kernels draw from high - low values, an int64: a wider range would overflow it.
  int64_t range = 0;
  LOOM_CHECK(!__builtin_sub_overflow(high, low, &range), ValueError, "randint: the range [", low, ", ", high,
             ") holds more than 2^63 - 1 values (at most INT64_MAX are supported)");
  Tensor t = finish(make_empty(shape, options, "randint"), options);
  Generator& g = default_generator();
  kernels::randint(t, low, high, g.seed(), g.reserve(blocks_for(t.numel())));
  return t;
}

Tensor bernoulli(const Tensor& p) {
  LOOM_CHECK(p.is_floating_point(), DTypeError, "bernoulli: expected floating-point probabilities, got ",
             dtype_name(p.dtype()));
  Tensor t = empty(p.sizes(), p.options());
  Generator& g = default_generator();
  kernels::bernoulli(t, p, g.seed(), g.reserve(blocks_for(t.numel())));
  return t;
}

Tensor bernoulli(const Shape& shape, double p, TensorOptions options) {
  LOOM_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli: p must be in [0, 1], got ", p);
  LOOM_CHECK(is_floating_point(options.dtype_), DTypeError, "bernoulli: expected a floating-point dtype, got ",
             dtype_name(options.dtype_));
  // p as a tensor of the output's dtype holds it: drawing against that value gives the
  // same numbers as bernoulli(full(shape, p, options)), without a probability tensor.
  const double p_stored =
      dispatch_floating(options.dtype_, "bernoulli", [&]<typename T>() { return double(Scalar(p).to<T>()); });
  Tensor t = make_empty(shape, options, "bernoulli");
  Generator& g = default_generator();
  kernels::bernoulli(t, p_stored, g.seed(), g.reserve(blocks_for(t.numel())));
  return t;
}

Tensor randperm(int64_t n, TensorOptions options) {
  LOOM_CHECK(n >= 0, ValueError, "randperm: n must be non-negative, got ", n);
  // Sort random keys: a permutation determined by the generator's counters alone.
  Tensor keys = rand({n}, kFloat64);
  std::vector<double> k = keys.to_vector<double>();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return k[size_t(a)] < k[size_t(b)]; });
  return from_vector(idx, {n}, options);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* generator) {
  const char* op = "multinomial";
  LOOM_CHECK(probs.dim() == 1 || probs.dim() == 2, ShapeError, op,
             ": expected 1-D or 2-D (rows of) weights, got shape ", shape_str(probs.sizes()));
  LOOM_CHECK(probs.is_floating_point(), DTypeError, op, ": expected floating-point weights, got ",
             dtype_name(probs.dtype()));
  const int64_t categories = probs.size(-1);
  LOOM_CHECK(categories > 0, ValueError, op, ": weights of shape ", shape_str(probs.sizes()),
             " have no categories to draw from");
  LOOM_CHECK(num_samples > 0, ValueError, op, ": num_samples must be positive, got ", num_samples);
  LOOM_CHECK(replacement || num_samples <= categories, ValueError, op, ": cannot draw ", num_samples,
             " samples without replacement from ", categories, " categories (weights of shape ",
             shape_str(probs.sizes()), ")");
  const Tensor rows = (probs.dim() == 1 ? probs.detach().reshape({1, categories}) : probs.detach()).contiguous();
  Tensor out = empty({rows.size(0), num_samples}, TensorOptions(kInt64).device(probs.device()));
  // Philox counters per (row, sample) or (row, category): Note [multinomial draws].
  Generator& g = generator != nullptr ? *generator : default_generator();
  const int64_t draws = rows.size(0) * (replacement ? num_samples : categories);
  kernels::multinomial(out, rows, replacement, g.seed(), g.reserve(blocks_for(draws)));
  return probs.dim() == 1 ? out.reshape({num_samples}) : out;
}

Tensor Tensor::multinomial(int64_t num_samples, bool replacement, Generator* generator) const {
  return loom::multinomial(*this, num_samples, replacement, generator);
}

}  // namespace loom
