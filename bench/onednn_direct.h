// oneDNN's matmul primitive called directly, as a program using oneDNN itself would: the
// practical ceiling bench_core sets Loom's GEMMs against (issue 34: Loom's bfloat16 GEMM at
// least 0.9x of it). Nothing of Loom runs here but the timing around it.
//
// C (M, N) float32 = A (M, K) · B (K, N), A and B row-major of one type (float32 or
// bfloat16), B either as given ("plain": the primitive reads the row-major matrix, as a
// matmul of two tensors must) or reordered once, outside the timing, into the layout the
// primitive prefers ("packed": as a weight prepacked once). One call runs on oneDNN's own
// OpenMP team of `threads` threads (Debian's oneDNN threads with OpenMP), not on Loom's pool.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <random>
#include <string>

#include "core/half.h"

extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

namespace bench {

class OneDnnDirectMatmul {
 public:
  // Throws dnnl::error where oneDNN makes no such primitive (bfloat16 without AVX-512).
  OneDnnDirectMatmul(int64_t M, int64_t K, int64_t N, bool bf16, bool packed, int threads)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), threads_(threads) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dt t = bf16 ? dt::bf16 : dt::f32;
    const dnnl::memory::desc a_plain({M, K}, t, tag::ab), b_plain({K, N}, t, tag::ab),
        c_desc({M, N}, dt::f32, tag::ab);
    const dnnl::memory::desc b_asked = packed ? dnnl::memory::desc({K, N}, t, tag::any) : b_plain;
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_plain, b_asked, c_desc), engine_);
    impl_ = pd.impl_info_str();
    a_ = dnnl::memory(a_plain, engine_);
    b_ = dnnl::memory(pd.weights_desc(), engine_);
    c_ = dnnl::memory(c_desc, engine_);
    fill(a_, M * K, bf16);
    dnnl::memory b_values(b_plain, engine_);
    fill(b_values, K * N, bf16);
    if (pd.weights_desc() == b_plain) {
      b_ = b_values;
    } else {
      with_threads([&] { dnnl::reorder(b_values, b_).execute(stream_, b_values, b_); });
    }
    matmul_ = dnnl::matmul(pd);
  }

  void run() {
    with_threads([&] {
      matmul_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
    });
  }

  // The implementation oneDNN picked, e.g. "brg:avx512_core_amx_bf16" or "gemm:jit".
  const std::string& impl() const { return impl_; }

 private:
  template <typename F>
  void with_threads(F&& f) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads_);
    f();
    stream_.wait();
    omp_set_num_threads(saved);
  }

  // Uniform values in [-1, 1), rounded to bfloat16 where the operands are bfloat16.
  static void fill(dnnl::memory& m, int64_t count, bool bf16) {
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    void* data = m.get_data_handle();
    for (int64_t i = 0; i < count; ++i) {
      const float v = u(gen);
      if (bf16) static_cast<uint16_t*>(data)[i] = loom::BFloat16(v).bits;
      else static_cast<float*>(data)[i] = v;
    }
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  int threads_;
  std::string impl_;
  dnnl::memory a_, b_, c_;
  dnnl::matmul matmul_;
};

}  // namespace bench
