// CUDA random fills: uniform, normal, bernoulli, randint. Element i (row-major) gets the
// same Philox words and the same formula (kernels/math/random_math.h) as on the CPU
// (kernels/cpu/random.cpp), so a GPU tensor equals the CPU one for the same seed and
// offset; gpu_random (kernels/cuda/launch.cuh) computes one Philox block per pair.
#include "core/factories.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/random_math.h"

namespace loom::kernels::cuda {
namespace {

template <typename T>
struct UniformFunctor {
  double low, high;
  LOOM_HOST_DEVICE T operator()(uint32_t w0, uint32_t w1) const {
    return random_math::uniform_value<T>(w0, w1, low, high);
  }
};

template <typename T>
struct NormalFunctor {
  double mean, std;
  LOOM_HOST_DEVICE T operator()(uint32_t w0, uint32_t w1) const {
    return random_math::normal_value<T>(w0, w1, mean, std);
  }
};

template <typename T>
struct RandintFunctor {
  int64_t low;
  uint64_t range;
  LOOM_HOST_DEVICE T operator()(uint32_t w0, uint32_t w1) const {
    return random_math::randint_value<T>(w0, w1, low, range);
  }
};

// 1 with probability p; a p outside [0, 1] (or NaN) is written to *invalid for the host
// to report.
template <typename T>
struct BernoulliFunctor {
  double* invalid;
  LOOM_HOST_DEVICE T operator()(uint32_t w0, uint32_t, double p) const {
    if (!(p >= 0 && p <= 1)) *invalid = p;
    return T(random_math::bernoulli_value(w0, p) ? 1 : 0);
  }
};

// 1 with probability p, one p for all (checked on the host by the caller).
template <typename T>
struct ScalarBernoulliFunctor {
  double p;
  LOOM_HOST_DEVICE T operator()(uint32_t w0, uint32_t) const {
    return T(random_math::bernoulli_value(w0, p) ? 1 : 0);
  }
};

}  // namespace

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  dispatch_floating(dst.dtype(), "uniform_", [&]<typename T>() {
    gpu_random<T>(dst, seed, offset, UniformFunctor<T>{low, high}, {});
  });
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  dispatch_floating(dst.dtype(), "normal_", [&]<typename T>() {
    gpu_random<T>(dst, seed, offset, NormalFunctor<T>{mean, std}, {});
  });
}

void bernoulli(const Tensor& dst, const Tensor& p, uint64_t seed, uint64_t offset) {
  LOOM_CHECK(p.device() == dst.device(), DeviceError, "bernoulli: probabilities on ", p.device(),
             " for a tensor on ", dst.device());
  if (dst.numel() == 0) return;
  // One slot holding a valid probability, overwritten by the kernel with any invalid one.
  // Reading it back waits for the kernel: the price of the CPU's ValueError.
  Tensor invalid = full({1}, 0.5, TensorOptions(kFloat64).device(dst.device()));
  dispatch_all(dst.dtype(), "bernoulli", [&]<typename T>() {
    dispatch_floating(p.dtype(), "bernoulli", [&]<typename P>() {
      gpu_random<T, P>(dst, seed, offset, BernoulliFunctor<T>{invalid.data_ptr<double>()}, {&p});
    });
  });
  const double v = invalid.item<double>();
  LOOM_CHECK(v >= 0 && v <= 1, ValueError, "bernoulli: probabilities must be in [0, 1], got ", v);
}

// p was checked by the entry point (kernels/cpu/random.cpp): nothing to read back.
void bernoulli(const Tensor& dst, double p, uint64_t seed, uint64_t offset) {
  dispatch_all(dst.dtype(), "bernoulli", [&]<typename T>() {
    gpu_random<T>(dst, seed, offset, ScalarBernoulliFunctor<T>{p}, {});
  });
}

void randint(const Tensor& dst, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = uint64_t(high - low);
  dispatch_numeric(dst.dtype(), "randint", [&]<typename T>() {
    gpu_random<T>(dst, seed, offset, RandintFunctor<T>{low, range}, {});
  });
}

void add_random_kernels(Backend& b) {
  b.uniform = &uniform;
  b.normal = &normal;
  b.bernoulli = &bernoulli;
  b.bernoulli_scalar = &bernoulli;
  b.randint = &randint;
}

}  // namespace loom::kernels::cuda
