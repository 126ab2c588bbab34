// LibTorch's side of bench_core.cpp: the same gemm and tiny_add measurements, printed as
// the same JSON lines with "framework":"libtorch", so both can be compared in one run.
//
// Built by hand against Debian's libtorch-dev (1.13), from the repository root:
//   g++ -std=c++17 -O2 -I. -I/usr/include/torch/csrc/api/include bench/torch_bench_core.cpp \
//       -o torch_bench_core -ltorch -ltorch_cpu -lc10
// LibTorch's GEMM is whatever libblas.so.3 is: Debian's reference BLAS (~2 GFLOP/s) unless
// OpenBLAS is installed, and OpenBLAS misdetects this CPU (shared/workloads.md). For a
// fair run:
//   OPENBLAS_CORETYPE=SKYLAKEX OMP_NUM_THREADS=2 ./torch_bench_core --threads 2
// (without installing it: `apt-get download libopenblas0-pthread && dpkg -x <the .deb> ob`
// and add LD_LIBRARY_PATH=ob/usr/lib/x86_64-linux-gnu/openblas-pthread).
//
//   torch_bench_core [--threads N] [--quick]
#include <torch/torch.h>

#include "bench/bench_util.h"
#include "bench/fma_peak.h"

int main(int argc, char** argv) {
  const bench::Options o = bench::parse_options(argc, argv);
  if (o.threads > 0) torch::set_num_threads(o.threads);
  torch::manual_seed(0);
  const double ceiling = bench::measure_fma_peak(torch::get_num_threads(), o.quick).gflops;
  bench::gemm_lines("libtorch", torch::get_num_threads(), o.quick, ceiling, [](int64_t n) {
    return [a = torch::randn({n, n}), b = torch::randn({n, n})] { (void)torch::matmul(a, b); };
  });
  bench::tiny_add_lines("libtorch", torch::get_num_threads(), o.quick, [](int64_t n, bool requires_grad) {
    const auto opts = torch::TensorOptions().requires_grad(requires_grad);
    return [a = torch::randn({n}, opts), b = torch::randn({n}, opts)] { (void)(a + b); };
  });
  return 0;
}
