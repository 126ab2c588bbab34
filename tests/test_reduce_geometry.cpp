// How the CUDA reductions, softmax, cumsum and layer norm read a strided tensor in place
// (kernels/cuda/reduce_geometry.h, Note [reading reductions in place]), checked on the
// host: for every layout and set of reduced dims, the (outer, len, inner) view must visit
// exactly the elements of each output, in the output's row-major order, and the split
// chosen must read the fastest-moving index with the smallest stride.
#include "catch2_compat.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "core/factories.h"
#include "kernels/cuda/reduce_geometry.h"
#include "tests/test_util.h"

using namespace loom;
using kernels::cuda::ReduceGeometry;

namespace {

// Offsets (in elements, from the first element) of t's elements grouped by output: the
// row-major index over the kept dims.
std::map<int64_t, std::vector<int64_t>> offsets_by_output(const Tensor& t, const Dims& reduced) {
  std::map<int64_t, std::vector<int64_t>> out;
  const int64_t n = t.numel();
  std::vector<int64_t> index(size_t(t.dim()), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t offset = 0, k = 0;
    for (int64_t d = 0; d < t.dim(); ++d) {
      offset += index[size_t(d)] * t.stride(d);
      if (!std::binary_search(reduced.begin(), reduced.end(), d)) k = k * t.size(d) + index[size_t(d)];
    }
    out[k].push_back(offset);
    for (int64_t d = t.dim() - 1; d >= 0; --d) {  // next multi-index, row-major
      if (++index[size_t(d)] < t.size(d)) break;
      index[size_t(d)] = 0;
    }
  }
  return out;
}

std::map<int64_t, std::vector<int64_t>> offsets_by_output(const ReduceGeometry& g) {
  std::map<int64_t, std::vector<int64_t>> out;
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t i = 0; i < g.inner; ++i)
      for (int64_t r = 0; r < g.len; ++r)
        out[o * g.inner + i].push_back(o * g.outer_stride + r * g.len_stride + i * g.inner_stride);
  return out;
}

// Every non-empty subset of t's dims, ascending.
std::vector<Dims> dim_subsets(int64_t ndim) {
  std::vector<Dims> out;
  for (int64_t mask = 1; mask < (int64_t(1) << ndim); ++mask) {
    Dims dims;
    for (int64_t d = 0; d < ndim; ++d)
      if (mask & (int64_t(1) << d)) dims.push_back(d);
    out.push_back(dims);
  }
  return out;
}

// Contiguous tensors, transposes, slices with offsets and gaps, broadcast (stride 0) views
// and size-1 dims.
std::vector<std::pair<std::string, Tensor>> layouts() {
  const Tensor a = zeros({4, 5, 6});
  return {{"contiguous (4, 5, 6)", a},
          {"transposed", a.transpose(0, 2)},
          {"permuted", a.permute({1, 2, 0})},
          {"sliced rows", a.slice(1, 1, 4)},
          {"sliced columns", a.slice(2, 2, 5)},
          {"every other", a.slice(2, 0, 6, 2)},
          {"broadcast", zeros({5, 1}).expand({3, 5, 4})},
          {"size-1 dims", zeros({1, 7, 1, 3})},
          {"1-D", zeros({7})},
          {"2-D", zeros({3, 8})},
          {"2-D transposed", zeros({8, 3}).t()}};
}

}  // namespace

TEST_CASE("reduce geometry (host): each output's elements, for every layout and set of dims", "[cuda_host]") {
  for (const auto& [name, t] : layouts()) {
    for (const Dims& dims : dim_subsets(t.dim())) {
      INFO(name << ", shape " << shape_str(t.sizes()) << ", strides " << shape_str(t.strides()) << ", dims "
                << shape_str(dims));
      const std::optional<ReduceGeometry> g = kernels::cuda::reduce_geometry(t.sizes(), t.strides(), dims);
      if (!g) continue;  // the caller copies such a layout first
      CHECK(g->outer * g->len * g->inner == t.numel());
      auto want = offsets_by_output(t, dims), got = offsets_by_output(*g);
      for (auto* m : {&want, &got})
        for (auto& [k, v] : *m) std::sort(v.begin(), v.end());
      CHECK(got == want);
    }
  }
}

TEST_CASE("reduce geometry (host): the coalesced split is chosen, and unmergeable dims have none", "[cuda_host]") {
  const Tensor a = zeros({64, 32});
  const auto rows = kernels::cuda::reduce_geometry(a.sizes(), a.strides(), {1});  // a row each
  REQUIRE(rows);
  CHECK((rows->outer == 64 && rows->len == 32 && rows->inner == 1 && rows->len_stride == 1));
  const auto bias = kernels::cuda::reduce_geometry(a.sizes(), a.strides(), {0});  // a bias gradient
  REQUIRE(bias);
  CHECK((bias->outer == 1 && bias->len == 64 && bias->len_stride == 32 && bias->inner == 32 &&
         bias->inner_stride == 1));
  const auto all = kernels::cuda::reduce_geometry(a.sizes(), a.strides(), {0, 1});
  REQUIRE(all);
  CHECK((all->outer == 1 && all->inner == 1 && all->len == 64 * 32 && all->len_stride == 1));
  const Tensor t = a.t();  // (32, 64) with strides (1, 32): dim 0 is the contiguous one
  const auto across = kernels::cuda::reduce_geometry(t.sizes(), t.strides(), {0});
  REQUIRE(across);
  CHECK((across->inner == 1 && across->len_stride == 1 && across->outer == 64));
  const Tensor b = zeros({3, 4, 5});
  CHECK_FALSE(kernels::cuda::reduce_geometry(b.sizes(), b.strides(), {0, 2}));
  const Tensor middle = zeros({3, 4, 5});
  const auto m = kernels::cuda::reduce_geometry(middle.sizes(), middle.strides(), {1});
  REQUIRE(m);
  CHECK((m->outer == 3 && m->outer_stride == 20 && m->len == 4 && m->len_stride == 5 && m->inner == 5 &&
         m->inner_stride == 1));
}

TEST_CASE("reduce geometry (host): along one dim, element (o, r, i) is the one softmax and cumsum expect",
          "[cuda_host]") {
  for (const auto& [name, t] : layouts()) {
    for (int64_t dim = 0; dim < t.dim(); ++dim) {
      INFO(name << ", shape " << shape_str(t.sizes()) << ", strides " << shape_str(t.strides()) << ", dim " << dim);
      const std::optional<ReduceGeometry> g = kernels::cuda::dim_geometry(t, dim);
      if (!g) continue;
      REQUIRE(g->len == t.size(dim));
      REQUIRE(g->outer * g->len * g->inner == t.numel());
      // Walk the multi-indices in row-major order: o runs over the dims before `dim`, i over
      // those after it, each row-major.
      std::vector<int64_t> index(size_t(t.dim()), 0);
      for (int64_t e = 0; e < t.numel(); ++e) {
        int64_t offset = 0, o = 0, i = 0;
        for (int64_t d = 0; d < t.dim(); ++d) {
          offset += index[size_t(d)] * t.stride(d);
          if (d < dim) o = o * t.size(d) + index[size_t(d)];
          if (d > dim) i = i * t.size(d) + index[size_t(d)];
        }
        const int64_t r = index[size_t(dim)];
        REQUIRE(o * g->outer_stride + r * g->len_stride + i * g->inner_stride == offset);
        for (int64_t d = t.dim() - 1; d >= 0; --d) {
          if (++index[size_t(d)] < t.size(d)) break;
          index[size_t(d)] = 0;
        }
      }
    }
  }
  const Tensor b = zeros({2, 3, 4}).transpose(0, 2);  // (4, 3, 2), strides (1, 4, 12)
  CHECK_FALSE(kernels::cuda::dim_geometry(b, 0));       // dims 1 and 2 after it do not merge
  CHECK_FALSE(kernels::cuda::dim_geometry(b, 2));       // nor 0 and 1 before it
  CHECK(kernels::cuda::dim_geometry(b, 1));
}

TEST_CASE("reduce geometry (host): 16-byte row loads apply exactly where every row's vectors are aligned",
          "[cuda_host]") {
  // The rule against a loop over every row's start and every element's place: for rows of
  // `len` elements `len_stride` apart, `outer` rows `outer_stride` apart, from base + offset.
  alignas(16) static char base[1 << 12];
  std::mt19937 rng(7);
  auto pick = [&](std::vector<int64_t> values) { return values[rng() % values.size()]; };
  auto check = [&]<typename T>() {
    constexpr int64_t VEC = 16 / sizeof(T);
    for (int trial = 0; trial < 400; ++trial) {
      const int64_t outer = pick({1, 2, 3, 5}), len = pick({1, 4, 8, 12, 16, 24, 7});
      const int64_t len_stride = pick({1, 1, 2}), outer_stride = len * len_stride + pick({0, 0, 1, 4, 8});
      const int64_t offset = pick({0, 0, 2, 4, 8}) * int64_t(sizeof(T));
      const void* p = base + offset;
      bool expected = len_stride == 1 && len % VEC == 0;
      for (int64_t o = 0; o < outer; ++o)
        expected &= (offset + o * outer_stride * int64_t(sizeof(T))) % 16 == 0;
      const kernels::cuda::ReduceGeometry g{outer, len, 1, outer_stride, len_stride, 1};
      INFO("T bytes " << sizeof(T) << " outer " << outer << " len " << len << " strides " << outer_stride << ","
                      << len_stride << " offset " << offset);
      CHECK(kernels::cuda::rows_vectorize<T>({{p, g}}) == expected);
      // Several operands: every one must allow it.
      CHECK(kernels::cuda::rows_vectorize<T>({{base, kernels::cuda::contiguous_rows(2, 16)}, {p, g}}) == expected);
    }
    // A contiguous matrix: its rows, when n is a whole number of vectors and the data aligned.
    CHECK(kernels::cuda::rows_vectorize<T>({{base, kernels::cuda::contiguous_rows(3, 4 * VEC)}}));
    CHECK_FALSE(kernels::cuda::rows_vectorize<T>({{base + sizeof(T), kernels::cuda::contiguous_rows(3, 4 * VEC)}}));
  };
  check.operator()<float>();
  check.operator()<uint16_t>();
  check.operator()<double>();
}

TEST_CASE("reduce geometry (host): column reductions split their steps into whole, non-empty chunks",
          "[cuda_host]") {
  for (int64_t len : {1, 7, 127, 128, 129, 1000, 4096, 100000})
    for (int64_t tiles : {1, 3, 64, 1056, 5000})
      for (int64_t max_blocks : {264, 1056}) {
        const kernels::cuda::ColumnChunks c = kernels::cuda::column_chunks(len, tiles, max_blocks, 8);
        INFO("len " << len << " tiles " << tiles << " max_blocks " << max_blocks);
        REQUIRE(c.count >= 1);
        CHECK(c.count * c.len >= len);        // every step in a chunk
        CHECK((c.count - 1) * c.len < len);   // the last chunk not empty
        // No more chunks than the tiles leave blocks for (one at least), nor than give each
        // of the 8 thread rows 16 steps.
        CHECK(c.count <= std::max<int64_t>(max_blocks / tiles, 1));
        CHECK(c.count <= std::max<int64_t>((len + 127) / 128, 1));
        if (tiles >= max_blocks || len <= 128) CHECK(c.count == 1);
      }
}
