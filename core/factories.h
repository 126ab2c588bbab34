// Tensor factories, as in PyTorch: zeros({2, 3}), arange(10, kInt64), randn({4, 4}), ...
#pragma once

#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace loom {

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, Scalar value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
// Scalar (0-dim) tensor.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

// [start, end) in steps; integer arguments give int64 unless options say otherwise.
Tensor arange(Scalar end, TensorOptions options = kInt64);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = kInt64);
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});

// From host data: the dtype follows T unless options give another one.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options);
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  return from_vector(values, shape, TensorOptions(dtype_of<T>));
}
template <typename T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{int64_t(values.size())});
}
// tensor({1.f, 2.f, 3.f}) is 1-D; tensor({1, 2, 3, 4}, {2, 2}) has that shape.
template <typename T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape) {
  return from_vector(std::vector<T>(values), shape);
}
template <typename T>
Tensor tensor(std::initializer_list<T> values) {
  return from_vector(std::vector<T>(values));
}

// Random factories draw from the global generator (loom::manual_seed).
Tensor rand(const Shape& shape, TensorOptions options = {});    // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions options = {});   // N(0, 1)
// Uniform in [low, high); ValueError unless low < high and high - low fits in int64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = kInt64);
Tensor bernoulli(const Tensor& p);                              // same shape, 0/1 of p's dtype
Tensor bernoulli(const Shape& shape, double p, TensorOptions options = {});  // floating dtype, 1 w.p. p
Tensor randperm(int64_t n, TensorOptions options = kInt64);
// As torch.multinomial: num_samples int64 category indices per row of the non-negative
// weights probs (1-D: (num_samples,); 2-D (rows, categories): (rows, num_samples)), which
// need not sum to 1. Without replacement the indices of a row are distinct. Draws from
// `generator` (the global one when null), with the same samples on every device for the
// same seed (Note [multinomial draws], kernels/math/multinomial_math.h).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* generator = nullptr);

}  // namespace loom
