// The CUDA reductions, softmax and indexing kernels (kernels/cuda/reduce.cu, softmax.cu,
// index.cu) against the CPU ones: every dtype the CPU takes, reduced dims inner, outer,
// middle and all, sizes that are not multiples of a block, non-contiguous inputs, NaN
// propagation, repeated indices, bad indices, and autograd through softmax. GPU outputs
// are poisoned (NaN or a sentinel) before a kernel writes them, so an element it misses
// fails, and each sits between sentinels that must be left untouched (a write out of
// bounds fails). All cases are "[.cuda]": they skip themselves without a GPU.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "cuda_test_util.h"
#include "test_util.h"

#include "kernels/kernels.h"

using namespace loom;
using namespace loom::test;
using kernels::ReduceOp;

namespace {

const std::vector<DType> kNumeric{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32};

Tensor poisoned(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, TensorOptions(dtype).device(kCUDA));
  kernels::fill(t, is_floating_point(dtype) ? Scalar(std::numeric_limits<double>::quiet_NaN()) : Scalar(-123456789));
  return t;
}

struct Out {
  Shape shape;
  DType dtype;
};
using Inputs = std::function<std::vector<Tensor>(Device)>;
using Run = std::function<void(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins)>;

// Runs `run` on the CPU (fresh outputs) and the GPU (poisoned outputs) and compares every
// output, with the dtype's tolerance widened by extra_atol (long float sums).
void compare(const std::string& what, const std::vector<Out>& outs, const Inputs& inputs, const Run& run,
             double extra_atol = 0) {
  INFO(what);
  std::vector<Tensor> cpu_outs, gpu_outs;
  std::vector<Guarded> guards;
  for (const Out& o : outs) {
    cpu_outs.push_back(empty(o.shape, o.dtype));
    guards.push_back(guarded(o.shape, o.dtype));
    gpu_outs.push_back(guards.back().out);
  }
  run(cpu_outs, inputs(kCPU));
  run(gpu_outs, inputs(kCUDA));
  for (size_t k = 0; k < outs.size(); ++k) {
    REQUIRE(gpu_outs[k].is_cuda());
    check_sentinels(guards[k], what + ", output " + std::to_string(k));
    const std::vector<double> want = cpu_outs[k].to_vector<double>();
    const std::vector<double> got = gpu_outs[k].cpu().to_vector<double>();
    REQUIRE(got.size() == want.size());
    const Tolerance tol = tolerance(outs[k].dtype);
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i]) && std::isnan(got[i])) continue;
      if (std::isinf(want[i]) && got[i] == want[i]) continue;
      INFO("output " << k << " element " << i << ": got " << got[i] << ", expected " << want[i] << " ("
                     << dtype_name(outs[k].dtype) << ")");
      REQUIRE(std::abs(got[i] - want[i]) <= tol.atol + extra_atol + tol.rtol * std::abs(want[i]));
    }
  }
}

Shape without(const Shape& shape, const Dims& dims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (std::find(dims.begin(), dims.end(), int64_t(d)) == dims.end()) out.push_back(shape[d]);
  return out;
}

std::string dims_str(const Dims& dims) {
  std::string s;
  for (int64_t d : dims) s += std::to_string(d) + ",";
  return s;
}

// A (6, 9, 5) input, contiguous or as the transpose of a (5, 9, 6) base.
Inputs input_3d(DType dtype, bool transposed) {
  const Tensor base = random_nonzero(transposed ? Shape{5, 9, 6} : Shape{6, 9, 5}, dtype);
  return [base, transposed](Device d) {
    const Tensor x = base.to(d);
    return std::vector<Tensor>{transposed ? x.transpose(0, 2) : x};
  };
}

const std::vector<Dims> kDimSets{{2}, {0}, {1}, {0, 2}, {0, 1, 2}};

}  // namespace

TEST_CASE("cuda reductions: reduce matches the CPU for every dtype, dims and layout", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(1);
  for (DType dtype : kNumeric) {
    for (bool transposed : {false, true}) {
      const Inputs in = input_3d(dtype, transposed);
      for (const Dims& dims : kDimSets) {
        for (const kernels::ReduceOpInfo& row : kernels::kReduceOps) {  // every ReduceOp
          const ReduceOp op = row.op;
          if (op == ReduceOp::Prod && dims.size() > 1) continue;  // keep products finite
          compare(std::string(row.name) + " " + dtype_name(dtype) + " dims " + dims_str(dims) +
                      (transposed ? " transposed" : ""),
                  {{without({6, 9, 5}, dims), dtype}}, in,
                  [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                    kernels::reduce(op, o[0], x[0], dims);
                  });
        }
      }
    }
  }
}

TEST_CASE("cuda reductions: full reductions of 1, 7, 1000 and 1000003 elements", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(2);
  for (int64_t n : {1, 7, 1000, 1000003}) {
    for (DType dtype : {kFloat32, kFloat64, kInt64}) {
      const Tensor base = random_nonzero({n}, dtype);
      const Inputs in = [base](Device d) { return std::vector<Tensor>{base.to(d)}; };
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min}) {
        // Summation order differs (tree vs SIMD lanes): allow float32 rounding of n terms
        // in a sum (a mean divides that by n).
        const double extra = dtype != kFloat32 ? 0 : op == ReduceOp::Sum ? 1e-6 * double(n) : 1e-6;
        compare(std::string(kernels::op_info(op).name) + " n=" + std::to_string(n) + " " + dtype_name(dtype), {{{}, dtype}}, in,
                [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                  kernels::reduce(op, o[0], x[0], {0});
                }, extra);
      }
      if (dtype == kFloat64) {  // and the sum against a plain loop
        double sum = 0;
        for (double v : base.to_vector<double>()) sum += v;
        Tensor out = poisoned({}, kFloat64);
        kernels::reduce(ReduceOp::Sum, out, base.to(kCUDA), {0});
        CHECK(out.cpu().to_vector<double>()[0] == Approx(sum).epsilon(1e-12).margin(1e-9));
      }
    }
  }
}

TEST_CASE("cuda reductions: max, min and their indices propagate NaN", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(3);
  for (DType dtype : {kFloat32, kFloat16}) {
    Tensor base = random_nonzero({4, 300}, kFloat64);
    std::vector<double> v = base.to_vector<double>();
    v[1 * 300 + 17] = NAN;  // row 1: one NaN
    v[2 * 300 + 5] = NAN;   // row 2: two, the first wins the index
    v[2 * 300 + 250] = NAN;
    const Tensor x = from_vector<double>(v, {4, 300}).to(dtype);
    const Inputs in = [x](Device d) { return std::vector<Tensor>{x.to(d)}; };
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      Tensor out = poisoned({4}, dtype);
      kernels::reduce(op, out, x.to(kCUDA), {1});
      const std::vector<double> got = out.cpu().to_vector<double>();
      CHECK(!std::isnan(got[0]));
      CHECK(std::isnan(got[1]));
      CHECK(std::isnan(got[2]));
      CHECK(!std::isnan(got[3]));
    }
    for (bool is_max : {true, false}) {
      compare(std::string("arg_reduce NaN ") + dtype_name(dtype), {{{4}, dtype}, {{4}, kInt64}}, in,
              [&](const std::vector<Tensor>& o, const std::vector<Tensor>& xs) {
                kernels::arg_reduce(is_max, o[0], o[1], xs[0], 1);
              });
      Tensor values = poisoned({4}, dtype), indices = poisoned({4}, kInt64);
      kernels::arg_reduce(is_max, values, indices, x.to(kCUDA), 1);
      const std::vector<int64_t> at = indices.cpu().to_vector<int64_t>();
      CHECK(at[1] == 17);
      CHECK(at[2] == 5);
    }
  }
}

TEST_CASE("cuda reductions: arg_reduce matches the CPU, ties giving the first index", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(4);
  std::vector<DType> dtypes = kNumeric;
  dtypes.push_back(kBool);
  for (DType dtype : dtypes) {
    // Integers in [-2, 2] and bools tie a lot over 1000 elements.
    const Tensor base = dtype == kBool ? rand({7, 1000}, kFloat64).lt(0.5) : random_nonzero({7, 1000}, dtype);
    for (bool transposed : {false, true}) {
      const Inputs in = [base, transposed](Device d) {
        const Tensor x = base.to(d);
        return std::vector<Tensor>{transposed ? x.transpose(0, 1) : x};
      };
      for (int64_t dim : {0, 1}) {
        const Shape shape = transposed ? Shape{1000, 7} : Shape{7, 1000};
        const Shape out_shape = without(shape, {dim});
        for (bool is_max : {true, false}) {
          compare(std::string("arg_reduce ") + dtype_name(dtype) + " dim " + std::to_string(dim) +
                      (transposed ? " transposed" : ""),
                  {{out_shape, dtype}, {out_shape, kInt64}}, in,
                  [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                    kernels::arg_reduce(is_max, o[0], o[1], x[0], dim);
                  });
        }
      }
    }
  }
}

TEST_CASE("cuda reductions: variance matches the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(5);
  for (DType dtype : float_dtypes()) {
    for (bool transposed : {false, true}) {
      const Inputs in = input_3d(dtype, transposed);
      for (const Dims& dims : kDimSets) {
        for (int64_t correction : {0, 1}) {
          compare(std::string("var ") + dtype_name(dtype) + " dims " + dims_str(dims) + " correction " +
                      std::to_string(correction),
                  {{without({6, 9, 5}, dims), dtype}}, in,
                  [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                    kernels::variance(o[0], x[0], dims, correction);
                  });
        }
      }
    }
  }
}

TEST_CASE("cuda reductions: cumsum matches the CPU along any dim", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(6);
  for (DType dtype : kNumeric) {
    for (bool transposed : {false, true}) {
      const Inputs in = input_3d(dtype, transposed);
      for (int64_t dim : {0, 1, 2}) {
        compare(std::string("cumsum ") + dtype_name(dtype) + " dim " + std::to_string(dim), {{{6, 9, 5}, dtype}}, in,
                [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) { kernels::cumsum(o[0], x[0], dim); });
      }
    }
  }
  for (DType dtype : {kFloat64, kInt64}) {  // one long row: many chunks with a carry
    const Tensor base = random_nonzero({2, 1000003}, dtype);
    compare(std::string("cumsum long ") + dtype_name(dtype), {{{2, 1000003}, dtype}},
            [base](Device d) { return std::vector<Tensor>{base.to(d)}; },
            [](const std::vector<Tensor>& o, const std::vector<Tensor>& x) { kernels::cumsum(o[0], x[0], 1); }, 1e-8);
  }
}

TEST_CASE("cuda reductions: softmax and log_softmax forward and backward match the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(7);
  for (DType dtype : float_dtypes()) {
    for (int64_t len : {3, 4096}) {
      const Tensor xb = random_nonzero({5, len}, dtype, -4, 4), gb = random_nonzero({5, len}, dtype);
      for (int64_t dim : {0, 1}) {
        for (bool transposed : {false, true}) {
          const Inputs in = [=](Device d) {
            const Tensor x = xb.to(d), g = gb.to(d);
            return transposed ? std::vector<Tensor>{x.t().contiguous().t(), g.t().contiguous().t()}
                              : std::vector<Tensor>{x, g};
          };
          for (bool log : {false, true}) {
            const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(dtype) + " len " +
                                     std::to_string(len) + " dim " + std::to_string(dim) +
                                     (transposed ? " strided" : "");
            compare(what, {{{5, len}, dtype}, {{5, len}, dtype}}, in,
                    [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                      kernels::softmax(o[0], x[0], dim, log);
                      kernels::softmax_backward(o[1], x[1], o[0], dim, log);
                    });
          }
        }
      }
    }
  }
}

TEST_CASE("cuda reductions: autograd of (x.softmax(1) * w).sum() on CUDA gives the CPU's gradients", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(8);
  const Tensor x0 = random_nonzero({6, 37}), w0 = random_nonzero({6, 37});
  Tensor grads[2];
  for (int k = 0; k < 2; ++k) {
    const Device d = k == 0 ? kCPU : kCUDA;
    Tensor x = x0.clone().to(d).requires_grad_(true);
    (x.softmax(1) * w0.to(d)).sum().backward();
    REQUIRE(x.grad().device() == d);
    grads[k] = x.grad().cpu();
  }
  check_close(grads[1], grads[0], "d/dx");
  // And the CPU against the formula: y * (w - sum(w * y)) per row.
  const Tensor y = x0.softmax(1);
  check_close(grads[0], values(y * (w0 - (w0 * y).sum(1, true))), kFloat32, "formula");
}

TEST_CASE("cuda reductions: index_select, gather, index_add, scatter_add and tril/triu match the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(9);
  // Repeated indices: the adds must accumulate every one.
  const Tensor idx = from_vector<int64_t>({3, 0, 3, 3, 1, 6, 0}, {7});
  const Tensor gidx = from_vector<int64_t>({0, 2, 2, 1, 0, 0, 2, 2, 1, 1, 0, 2, 1, 1, 2, 0, 0, 0, 2, 2, 2}, {7, 3});
  for (DType dtype : kNumeric) {
    const Tensor table = random_nonzero({7, 3}, dtype), src = random_nonzero({7, 3}, dtype);
    for (bool transposed : {false, true}) {
      const Inputs in = [=](Device d) {
        const Tensor t = table.to(d), s = src.to(d);
        return std::vector<Tensor>{transposed ? t.t().contiguous().t() : t, transposed ? s.t().contiguous().t() : s,
                                   idx.to(d), gidx.to(d)};
      };
      const std::string sfx = std::string(" ") + dtype_name(dtype) + (transposed ? " strided" : "");
      compare("index_select dim 0" + sfx, {{{7, 3}, dtype}}, in,
              [](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                kernels::index_select(o[0], x[0], 0, x[2]);
              });
      compare("gather dim 1" + sfx, {{{7, 3}, dtype}}, in,
              [](const std::vector<Tensor>& o, const std::vector<Tensor>& x) { kernels::gather(o[0], x[0], 1, x[3]); });
      compare("index_add dim 0" + sfx, {{{7, 3}, dtype}}, in,
              [](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                kernels::copy(o[0], x[0]);
                kernels::index_add(o[0], 0, x[2], x[1]);
              });
      compare("scatter_add dim 1" + sfx, {{{7, 3}, dtype}}, in,
              [](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                kernels::copy(o[0], x[0]);
                kernels::scatter_add(o[0], 1, x[3], x[1]);
              });
      for (int64_t k : {-1, 0, 2}) {
        for (bool lower : {true, false}) {
          compare("triangle k " + std::to_string(k) + sfx, {{{7, 3}, dtype}}, in,
                  [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                    kernels::triangle(o[0], x[0], k, lower);
                  });
        }
      }
    }
  }
  // A plain-loop check of scatter_add's accumulation on the deterministic float16 path.
  const Tensor ones16 = ones({7, 3}, kFloat16).to(kCUDA);
  Tensor acc = zeros({7, 3}, TensorOptions(kFloat16).device(kCUDA));
  kernels::scatter_add(acc, 1, gidx.to(kCUDA), ones16);
  const std::vector<int64_t> g = gidx.to_vector<int64_t>();
  std::vector<double> want(21, 0.0);
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t c = 0; c < 3; ++c) want[size_t(r * 3 + g[size_t(r * 3 + c)])] += 1;
  check_close(acc.cpu(), want, kFloat16, "scatter_add counts");
}

// ---- in place over any dims (Note [reading reductions in place]) -----------------------------

namespace {

enum class Layout { Contiguous, Transposed, OffsetSlice, Broadcast };

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Transposed: return "transposed";
    case Layout::OffsetSlice: return "offset slice";
    case Layout::Broadcast: return "broadcast";
    default: return "contiguous";
  }
}

// An input of `shape` in `layout`, the same values on each device: contiguous; the last two
// dims transposed in memory; a slice one element into wider rows (misaligned rows, a row
// stride that is not the row length); dim 0 broadcast (stride 0) from size 1.
Inputs layout_input(Shape shape, DType dtype, Layout layout, double low = -2, double high = 2) {
  const int64_t nd = int64_t(shape.size());
  Shape base_shape = shape;
  if (layout == Layout::Transposed && nd >= 2) std::swap(base_shape[size_t(nd - 1)], base_shape[size_t(nd - 2)]);
  if (layout == Layout::OffsetSlice) base_shape.back() += 3;
  if (layout == Layout::Broadcast) base_shape[0] = 1;
  const Tensor base = random_nonzero(base_shape, dtype, low, high);
  return [=](Device d) {
    Tensor x = base.to(d);
    if (layout == Layout::Transposed && nd >= 2) x = x.transpose(nd - 1, nd - 2);
    if (layout == Layout::OffsetSlice) x = x.slice(nd - 1, 1, 1 + shape.back());
    if (layout == Layout::Broadcast) x = x.expand(shape);
    return std::vector<Tensor>{x};
  };
}

const std::vector<Layout> kLayouts{Layout::Contiguous, Layout::Transposed, Layout::OffsetSlice, Layout::Broadcast};

// The (dtype, layout) pairs a case runs: float32 in every layout, float16 contiguous and
// misaligned, float64 and bfloat16 contiguous (the kernels' index math does not depend on
// the dtype, their loads do: 16-byte vectors of 2, 4 or 8 elements). The CUDA check runs
// racecheck over these tests: they stay small.
std::vector<std::pair<DType, Layout>> float_cases() {
  std::vector<std::pair<DType, Layout>> out;
  for (Layout l : kLayouts) out.push_back({kFloat32, l});
  out.insert(out.end(), {{kFloat16, Layout::Contiguous},
                         {kFloat16, Layout::OffsetSlice},
                         {kFloat64, Layout::Contiguous},
                         {kBFloat16, Layout::Contiguous}});
  return out;
}

// Each single dim, every dim, and (3-D) the first two and the last two.
std::vector<Dims> dim_sets(size_t nd) {
  std::vector<Dims> out;
  for (int64_t d = 0; d < int64_t(nd); ++d) out.push_back({d});
  if (nd > 1) {
    Dims all;
    for (int64_t d = 0; d < int64_t(nd); ++d) all.push_back(d);
    out.push_back(all);
  }
  if (nd == 3) out.insert(out.end(), {{0, 1}, {1, 2}});
  return out;
}

int64_t count_of(const Shape& shape, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[size_t(d)];
  return n;
}

// Sum's float32 rounding over n terms, in either order (a mean divides it by n).
double sum_slack(DType dtype, ReduceOp op, int64_t n) {
  if (dtype != kFloat32 && dtype != kFloat16 && dtype != kBFloat16) return 0;
  return op == ReduceOp::Sum ? 1e-6 * double(n) : op == ReduceOp::Mean ? 1e-6 : 0;
}

// Sum and max for every case; mean and min (the same kernels with another sink and
// comparison) for float32 contiguous.
void check_reductions(const Shape& shape, const std::vector<std::pair<DType, Layout>>& cases) {
  for (const auto& [dtype, layout] : cases) {
    const Inputs in = layout_input(shape, dtype, layout);
    for (const Dims& dims : dim_sets(shape.size())) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min}) {
        const bool every = op == ReduceOp::Sum || op == ReduceOp::Max;
        if (!every && !(dtype == kFloat32 && layout == Layout::Contiguous)) continue;
        compare(std::string(kernels::op_info(op).name) + " " + dtype_name(dtype) + " of " + shape_str(shape) + " " +
                    layout_name(layout) + " dims " + dims_str(dims),
                {{without(shape, dims), dtype}}, in,
                [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                  kernels::reduce(op, o[0], x[0], dims);
                },
                sum_slack(dtype, op, count_of(shape, dims)));
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda reductions: in place over inner, outer and middle dims of awkward sizes and layouts", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(31);
  // Rows shorter than a warp, than a block's reach (2048: a warp a row), and longer
  // (a block a row, split in chunks when the rows are few); columns of every width.
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {3, 7}, {33, 1}, {9, 300}, {5, 2049}, {3, 70, 5}, {2, 1, 9}})
    check_reductions(shape, float_cases());
  check_reductions({6, 33}, {{kInt64, Layout::Contiguous}, {kInt64, Layout::Transposed}, {kInt32, Layout::Contiguous}});
}

TEST_CASE("cuda reductions: long rows and columns split in chunks", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(32);
  // One long row (a full reduction: chunks, then a fold of the chunks), a few long rows, and
  // long columns (a bias gradient's shape), contiguous and strided.
  for (const Shape& shape : std::vector<Shape>{{1000003}, {2, 100003}, {4099, 7}, {20000, 64}, {4099, 1027}})
    check_reductions(shape,
                     {{kFloat32, Layout::Contiguous}, {kFloat32, Layout::OffsetSlice}, {kFloat16, Layout::Contiguous}});
}

TEST_CASE("cuda reductions: a bias gradient, the sum over dim 0 of (65536, 1024), against a plain loop",
          "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(33);
  const Tensor x = random_nonzero({65536, 1024});
  const Guarded g = guarded({1024}, kFloat32);
  kernels::reduce(ReduceOp::Sum, g.out, x.to(kCUDA), {0});
  check_sentinels(g, "bias gradient");
  const std::vector<float> xv = x.to_vector<float>();
  std::vector<double> want(1024, 0.0);
  for (int64_t r = 0; r < 65536; ++r)
    for (int64_t i = 0; i < 1024; ++i) want[size_t(i)] += double(xv[size_t(r * 1024 + i)]);
  const std::vector<double> got = g.out.cpu().to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("column " << i);
    CHECK(got[i] == Approx(want[i]).margin(2e-3));
  }
}

TEST_CASE("cuda reductions: arg_reduce and variance in place over inner, outer and middle dims", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(34);
  for (const Shape& shape : std::vector<Shape>{{7}, {3, 7}, {9, 300}, {5, 2049}, {3, 70, 5}, {4099, 7}}) {
    for (const auto& [dtype, layout] : float_cases()) {
      const Inputs in = layout_input(shape, dtype, layout);
      for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim) {
        const std::string what = std::string(dtype_name(dtype)) + " of " + shape_str(shape) + " " +
                                 layout_name(layout) + " dim " + std::to_string(dim);
        for (bool is_max : {true, false}) {
          compare("arg_reduce " + what, {{without(shape, {dim}), dtype}, {without(shape, {dim}), kInt64}}, in,
                  [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                    kernels::arg_reduce(is_max, o[0], o[1], x[0], dim);
                  });
        }
        compare("var " + what, {{without(shape, {dim}), dtype}}, in,
                [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                  kernels::variance(o[0], x[0], {dim}, 1);
                });
      }
      compare(std::string("var of all ") + dtype_name(dtype) + " of " + shape_str(shape) + " " + layout_name(layout),
              {{{}, dtype}}, in, [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) {
                Dims all;
                for (int64_t d = 0; d < int64_t(shape.size()); ++d) all.push_back(d);
                kernels::variance(o[0], x[0], all, 0);
              });
    }
  }
}

TEST_CASE("cuda reductions: cumsum in place along rows short and long, columns and middle dims", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(35);
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {3, 33}, {4, 1025}, {2, 5000}, {3, 70, 5}, {4099, 7}}) {
    std::vector<std::pair<DType, Layout>> cases = float_cases();
    cases.insert(cases.end(),
                 {{kInt64, Layout::Contiguous}, {kInt64, Layout::Transposed}, {kInt32, Layout::Contiguous}});
    for (const auto& [dtype, layout] : cases) {
      const Inputs in = layout_input(shape, dtype, layout);
      for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim) {
        // Running sums of up to 5000 terms: float32 rounding in either order.
        compare(std::string("cumsum ") + dtype_name(dtype) + " of " + shape_str(shape) + " " + layout_name(layout) +
                    " dim " + std::to_string(dim),
                {{shape, dtype}}, in,
                [&](const std::vector<Tensor>& o, const std::vector<Tensor>& x) { kernels::cumsum(o[0], x[0], dim); },
                dtype == kFloat32 ? 1e-6 * double(shape[size_t(dim)]) : 0);
      }
    }
  }
}

// ---- softmax (Note [CUDA softmax layout]) ------------------------------------------------------

namespace {

void check_softmax(const Shape& shape, int64_t dim, DType dtype, Layout layout) {
  const Inputs x = layout_input(shape, dtype, layout, -4, 4), g = layout_input(shape, dtype, layout);
  const Inputs both = [&](Device d) { return std::vector<Tensor>{x(d)[0], g(d)[0]}; };
  for (bool log : {false, true}) {
    compare(std::string(log ? "log_softmax " : "softmax ") + dtype_name(dtype) + " of " + shape_str(shape) + " " +
                layout_name(layout) + " dim " + std::to_string(dim),
            {{shape, dtype}, {shape, dtype}}, both, [&](const std::vector<Tensor>& o, const std::vector<Tensor>& in) {
              kernels::softmax(o[0], in[0], dim, log);
              kernels::softmax_backward(o[1], in[1], o[0], dim, log);
            });
  }
}

}  // namespace

TEST_CASE("cuda softmax: rows of every length a group of lanes or a block holds, and longer", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(36);
  // Each row configuration (4, 8, 16, 32 lanes; a warp with 2-32 elements a lane; a block
  // with its row in registers, 16-byte or scalar; a block reading memory), at and past
  // each boundary, in every layout: misaligned and strided rows take scalar loads.
  for (int64_t len : {1, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 100, 257, 1000, 1024, 1025, 2048, 4096, 4097, 10000}) {
    for (Layout layout : kLayouts) check_softmax({7, len}, 1, kFloat32, layout);
    check_softmax({7, len}, 1, kFloat16, Layout::Contiguous);
  }
  for (int64_t len : {5, 33, 1025, 4097}) {  // the other dtypes' loads: 16-byte vectors of 2 and 8
    for (const auto& [dtype, layout] : float_cases())
      if (dtype != kFloat32) check_softmax({7, len}, 1, dtype, layout);
  }
}

TEST_CASE("cuda softmax: along outer and middle dims, in place or through rows", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  manual_seed(37);
  // Columns: one thread each when there are at least 2048 of them, else copied to rows.
  for (const Shape& shape : std::vector<Shape>{{5, 3000}, {37, 5}, {300, 9}, {3, 40, 70}, {2, 5, 3}}) {
    for (const auto& [dtype, layout] : float_cases())
      for (int64_t dim = 0; dim + 1 < int64_t(shape.size()); ++dim) check_softmax(shape, dim, dtype, layout);
  }
}
