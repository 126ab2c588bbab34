// Tensor metadata, factories, printing (against PyTorch's repr), dtype conversions
// (16-bit rounding against PyTorch's bit patterns), host access and Device parsing.
#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"

using namespace loom;
using namespace loom::test;

namespace {

// Bit pattern of every element of a 16-bit tensor.
std::vector<uint16_t> bits16(const Tensor& t) {
  REQUIRE(t.element_size() == 2);
  Tensor c = t.contiguous();
  std::vector<uint16_t> out(size_t(c.numel()));
  std::memcpy(out.data(), c.data(), out.size() * 2);
  return out;
}

}  // namespace

// ---- metadata --------------------------------------------------------------------------

TEST_CASE("tensor metadata of a fresh tensor", "[core]") {
  Tensor t = zeros({2, 3, 4}, kFloat64);
  CHECK(t.defined());
  CHECK(t.sizes() == Shape{2, 3, 4});
  CHECK(t.shape() == Shape{2, 3, 4});
  CHECK(t.strides() == Shape{12, 4, 1});
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 24);
  CHECK(t.size(0) == 2);
  CHECK(t.size(-1) == 4);
  CHECK(t.stride(-2) == 4);
  CHECK(t.dtype() == kFloat64);
  CHECK(t.device() == kCPU);
  CHECK(t.is_cpu());
  CHECK_FALSE(t.is_cuda());
  CHECK(t.element_size() == 8);
  CHECK(t.nbytes() == 24 * 8);
  CHECK(t.is_contiguous());
  CHECK(t.storage_offset() == 0);
  CHECK(t.is_floating_point());
  CHECK(t.options().dtype_ == kFloat64);
  CHECK_FALSE(t.requires_grad());
  CHECK(t.is_leaf());
  CHECK(t.data() != nullptr);

  Tensor s = scalar_tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.sizes().empty());
  CHECK(s.is_contiguous());

  Tensor i = zeros({5}, kInt32);
  CHECK_FALSE(i.is_floating_point());
  CHECK(i.element_size() == 4);
  CHECK(zeros({1}, kBool).element_size() == 1);
  CHECK(zeros({1}, kFloat16).element_size() == 2);
  CHECK(zeros({1}, kBFloat16).element_size() == 2);

  // A zero-size tensor is contiguous and has no data.
  Tensor e = empty({0, 3});
  CHECK(e.numel() == 0);
  CHECK(e.is_contiguous());
  CHECK(e.strides() == Shape{3, 1});
}

TEST_CASE("tensor metadata errors", "[core]") {
  Tensor t = zeros({2, 3});
  require_throws_with<IndexError>([&] { t.size(2); }, {"size", "2", "2 dims"});
  require_throws_with<IndexError>([&] { t.stride(-3); }, {"stride", "-3"});
  Tensor undefined;
  CHECK_FALSE(undefined.defined());
  require_throws_with<ValueError>([&] { undefined.sizes(); }, {"sizes", "undefined"});
  require_throws_with<ValueError>([&] { undefined.numel(); }, {"numel", "undefined"});
  CHECK(undefined.str() == "Tensor(undefined)");
  require_throws_with<DTypeError>([&] { t.data_ptr<double>(); }, {"data_ptr", "float64", "float32"});
  CHECK(t.data_ptr<float>() == t.data());
}

TEST_CASE("shape_str and wrap_dim", "[core]") {
  CHECK(shape_str({}) == "()");
  CHECK(shape_str({4}) == "(4,)");  // as Python's tuple
  CHECK(shape_str({2, 3}) == "(2, 3)");
  CHECK(wrap_dim(-1, 3, "op") == 2);
  CHECK(wrap_dim(0, 0, "op") == 0);   // a 0-dim tensor accepts 0 and -1
  CHECK(wrap_dim(-1, 0, "op") == 0);
  require_throws_with<IndexError>([] { wrap_dim(3, 3, "myop"); }, {"myop", "3", "[-3, 2]"});
}

// ---- factories ---------------------------------------------------------------------------

TEST_CASE("zeros, ones, full and the _like factories", "[core]") {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool}) {
    INFO(dtype_name(dt));
    Tensor z = zeros({2, 3}, dt), o = ones({3, 2}, dt);
    CHECK(z.dtype() == dt);
    CHECK(z.sizes() == Shape{2, 3});
    for (double v : z.to_vector<double>()) CHECK(v == 0.0);
    for (double v : o.to_vector<double>()) CHECK(v == 1.0);
    CHECK(zeros_like(o).sizes() == Shape{3, 2});
    CHECK(zeros_like(o).dtype() == dt);
    CHECK(ones_like(z).to_vector<double>() == std::vector<double>(6, 1.0));
    CHECK(empty_like(z).sizes() == z.sizes());
    CHECK(empty_like(z).dtype() == dt);
  }
  Tensor f = full({4}, 2.5, kFloat64);
  CHECK(f.to_vector<double>() == std::vector<double>(4, 2.5));
  CHECK(full({2}, 7, kInt32).to_vector<int32_t>() == std::vector<int32_t>{7, 7});
  CHECK(full({2}, -3.75, kFloat16).to_vector<double>() == std::vector<double>{-3.75, -3.75});
  CHECK(full_like(f, -1).to_vector<double>() == std::vector<double>(4, -1.0));
  CHECK(full_like(f, -1).dtype() == kFloat64);
  CHECK(full({}, 3).item<float>() == 3.0f);

  Tensor s = scalar_tensor(4, kInt64);
  CHECK(s.dim() == 0);
  CHECK(s.item<int64_t>() == 4);

  Tensor r = zeros({2}, TensorOptions(kFloat64).requires_grad(true));
  CHECK(r.requires_grad());
  CHECK(r.is_leaf());
  CHECK(ones({2}, TensorOptions().requires_grad()).requires_grad());

  require_throws_with<ShapeError>([] { empty({2, -1}); }, {"empty", "(2, -1)"});
  require_throws_with<ShapeError>([] { zeros({-3}); }, {"(-3,)"});
  require_throws_with<DTypeError>([] { zeros({2}, TensorOptions(kInt64).requires_grad(true)); },
                                  {"requires_grad", "int64"});
}

TEST_CASE("arange", "[core]") {
  Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(0, 10, 3).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(-3, -1).to_vector<int64_t>() == std::vector<int64_t>{-3, -2});
  CHECK(arange(3, 3).numel() == 0);

  // A non-integral argument gives float32 (as torch.arange(1, 2, 0.25)).
  Tensor f = arange(1, 2, 0.25);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<double>() == std::vector<double>{1.0, 1.25, 1.5, 1.75});
  CHECK(arange(0, 1, 0.1).numel() == 10);
  CHECK(arange(0.5).to_vector<double>() == std::vector<double>{0.0});
  Tensor d = arange(0, 4, 1, kFloat64);
  CHECK(d.dtype() == kFloat64);
  CHECK(d.to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  CHECK(arange(0, 3, 1, kInt32).to_vector<int32_t>() == std::vector<int32_t>{0, 1, 2});
  CHECK(arange(3, TensorOptions(kFloat64).requires_grad()).requires_grad());

  require_throws_with<ValueError>([] { arange(0, 5, 0); }, {"arange", "step"});
  require_throws_with<ValueError>([] { arange(5, 0, 1); }, {"arange", "[5, 0)"});
}

TEST_CASE("linspace", "[core]") {
  Tensor l = linspace(0, 1, 5);
  CHECK(l.dtype() == kFloat32);
  CHECK(l.to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  Tensor d = linspace(-1, 2, 7, kFloat64);
  std::vector<double> ref;
  for (int i = 0; i < 7; ++i) ref.push_back(-1 + 0.5 * i);
  check_close(d, ref, kFloat64);
  CHECK(d.to_vector<double>().back() == 2.0);  // the end is hit exactly
  Tensor odd = linspace(0.1, 0.7, 13, kFloat64);
  CHECK(odd.to_vector<double>().front() == 0.1);
  CHECK(odd.to_vector<double>().back() == 0.7);
  CHECK(linspace(3, 5, 1).to_vector<double>() == std::vector<double>{3});
  CHECK(linspace(3, 5, 0).numel() == 0);
  CHECK(linspace(0, 10, 6, kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 6, 8, 10});
  require_throws_with<ValueError>([] { linspace(0, 1, -1); }, {"linspace", "-1"});
}

TEST_CASE("from_vector and tensor()", "[core]") {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(a.dtype() == kFloat64);
  CHECK(a.sizes() == Shape{2, 3});
  CHECK(a.select(1, 2).to_vector<double>() == std::vector<double>{3, 6});
  Tensor b = from_vector(std::vector<int64_t>{4, 5});
  CHECK(b.dtype() == kInt64);
  CHECK(b.sizes() == Shape{2});
  Tensor c = from_vector(std::vector<float>{1.5f, -2.5f}, {2}, kFloat16);
  CHECK(c.dtype() == kFloat16);
  CHECK(c.to_vector<double>() == std::vector<double>{1.5, -2.5});
  Tensor g = from_vector(std::vector<double>{1, 2}, {2}, TensorOptions(kFloat64).requires_grad());
  CHECK(g.requires_grad());

  CHECK(tensor({1.f, 2.f, 3.f}).dtype() == kFloat32);
  CHECK(tensor({1.f, 2.f, 3.f}).sizes() == Shape{3});
  Tensor i = tensor({1, 2, 3, 4}, {2, 2});
  CHECK(i.dtype() == kInt32);
  CHECK(i.sizes() == Shape{2, 2});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(tensor({true, false}).dtype() == kBool);
  CHECK(tensor({1.0}).dtype() == kFloat64);

  require_throws_with<ShapeError>([] { from_vector(std::vector<float>{1, 2, 3}, {2, 2}); },
                                  {"from_vector", "3 values", "(2, 2)"});
  require_throws_with<ShapeError>([] { from_vector(std::vector<float>{}, {0, -1}); }, {"from_vector", "(0, -1)"});
}

// ---- printing ------------------------------------------------------------------------------

TEST_CASE("str() matches PyTorch's repr", "[core]") {
  // Golden strings from /usr/bin/python3: repr(<expr>) with "torch." removed; grad_fn names
  // are Loom's (MulBackward for PyTorch's MulBackward0).
  struct Case {
    const char* python;
    Tensor t;
    const char* expected;
  };
  const std::vector<Case> cases = {
  {"torch.tensor([[1.,2.],[3.,4.]])", tensor({1.f, 2.f, 3.f, 4.f}, {2, 2}), "tensor([[1., 2.],\n        [3., 4.]])"},
  {"torch.tensor([1.5,-2.25,3.])", tensor({1.5f, -2.25f, 3.f}), "tensor([ 1.5000, -2.2500,  3.0000])"},
  {"torch.arange(6).reshape(2,3)", arange(6).reshape({2, 3}), "tensor([[0, 1, 2],\n        [3, 4, 5]])"},
  {"torch.tensor([True,False])", tensor({true, false}), "tensor([ True, False])"},
  {"torch.tensor([1.,2.],dtype=torch.float64)", tensor({1.0, 2.0}), "tensor([1., 2.], dtype=float64)"},
  {"torch.tensor([1e-5, 1.])", tensor({1e-5f, 1.f}), "tensor([1.0000e-05, 1.0000e+00])"},
  {"torch.tensor([1e9, 1.])", tensor({1e9f, 1.f}), "tensor([1.0000e+09, 1.0000e+00])"},
  {"torch.tensor([1., 2000.])", tensor({1.f, 2000.f}), "tensor([1.0000e+00, 2.0000e+03])"},
  {"torch.tensor([0.5, 2000.])", tensor({0.5f, 2000.f}), "tensor([5.0000e-01, 2.0000e+03])"},
  {"torch.tensor(3.5)", scalar_tensor(3.5), "tensor(3.5000)"},
  {"torch.tensor(-7)", scalar_tensor(-7, kInt64), "tensor(-7)"},
  {"torch.tensor([1.,2.],requires_grad=True)", tensor({1.f, 2.f}).requires_grad_(), "tensor([1., 2.], requires_grad=True)"},
  {"torch.zeros(2,2,2)", zeros({2, 2, 2}), "tensor([[[0., 0.],\n         [0., 0.]],\n\n        [[0., 0.],\n         [0., 0.]]])"},
  {"torch.zeros(2,3,0)", zeros({2, 3, 0}), "tensor([], size=(2, 3, 0))"},
  {"torch.zeros(0)", zeros({0}), "tensor([])"},
  {"torch.tensor([1,2],dtype=torch.int32)", tensor({1, 2}), "tensor([1, 2], dtype=int32)"},
  {"torch.tensor([-1,10,100])", tensor<int64_t>({-1, 10, 100}), "tensor([ -1,  10, 100])"},
  {"torch.arange(2000.)", arange(0.0, 2000.0, 1.0, kFloat32), "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])"},
  {"torch.arange(1500).reshape(50,30)", arange(1500).reshape({50, 30}), "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n        [  30,   31,   32,  ...,   57,   58,   59],\n        [  60,   61,   62,  ...,   87,   88,   89],\n        ...,\n        [1410, 1411, 1412,  ..., 1437, 1438, 1439],\n        [1440, 1441, 1442,  ..., 1467, 1468, 1469],\n        [1470, 1471, 1472,  ..., 1497, 1498, 1499]])"},
  {"torch.arange(2400.).reshape(4,20,30)/7", arange(0.0, 2400.0, 1.0, kFloat32).reshape({4, 20, 30}) / 7, "tensor([[[0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 3.8571e+00,\n          4.0000e+00, 4.1429e+00],\n         [4.2857e+00, 4.4286e+00, 4.5714e+00,  ..., 8.1429e+00,\n          8.2857e+00, 8.4286e+00],\n         [8.5714e+00, 8.7143e+00, 8.8571e+00,  ..., 1.2429e+01,\n          1.2571e+01, 1.2714e+01],\n         ...,\n         [7.2857e+01, 7.3000e+01, 7.3143e+01,  ..., 7.6714e+01,\n          7.6857e+01, 7.7000e+01],\n         [7.7143e+01, 7.7286e+01, 7.7429e+01,  ..., 8.1000e+01,\n          8.1143e+01, 8.1286e+01],\n         [8.1429e+01, 8.1571e+01, 8.1714e+01,  ..., 8.5286e+01,\n          8.5429e+01, 8.5571e+01]],\n\n        [[8.5714e+01, 8.5857e+01, 8.6000e+01,  ..., 8.9571e+01,\n          8.9714e+01, 8.9857e+01],\n         [9.0000e+01, 9.0143e+01, 9.0286e+01,  ..., 9.3857e+01,\n          9.4000e+01, 9.4143e+01],\n         [9.4286e+01, 9.4429e+01, 9.4571e+01,  ..., 9.8143e+01,\n          9.8286e+01, 9.8429e+01],\n         ...,\n         [1.5857e+02, 1.5871e+02, 1.5886e+02,  ..., 1.6243e+02,\n          1.6257e+02, 1.6271e+02],\n         [1.6286e+02, 1.6300e+02, 1.6314e+02,  ..., 1.6671e+02,\n          1.6686e+02, 1.6700e+02],\n         [1.6714e+02, 1.6729e+02, 1.6743e+02,  ..., 1.7100e+02,\n          1.7114e+02, 1.7129e+02]],\n\n        [[1.7143e+02, 1.7157e+02, 1.7171e+02,  ..., 1.7529e+02,\n          1.7543e+02, 1.7557e+02],\n         [1.7571e+02, 1.7586e+02, 1.7600e+02,  ..., 1.7957e+02,\n          1.7971e+02, 1.7986e+02],\n         [1.8000e+02, 1.8014e+02, 1.8029e+02,  ..., 1.8386e+02,\n          1.8400e+02, 1.8414e+02],\n         ...,\n         [2.4429e+02, 2.4443e+02, 2.4457e+02,  ..., 2.4814e+02,\n          2.4829e+02, 2.4843e+02],\n         [2.4857e+02, 2.4871e+02, 2.4886e+02,  ..., 2.5243e+02,\n          2.5257e+02, 2.5271e+02],\n         [2.5286e+02, 2.5300e+02, 2.5314e+02,  ..., 2.5671e+02,\n          2.5686e+02, 2.5700e+02]],\n\n        [[2.5714e+02, 2.5729e+02, 2.5743e+02,  ..., 2.6100e+02,\n          2.6114e+02, 2.6129e+02],\n         [2.6143e+02, 2.6157e+02, 2.6171e+02,  ..., 2.6529e+02,\n          2.6543e+02, 2.6557e+02],\n         [2.6571e+02, 2.6586e+02, 2.6600e+02,  ..., 2.6957e+02,\n          2.6971e+02, 2.6986e+02],\n         ...,\n         [3.3000e+02, 3.3014e+02, 3.3029e+02,  ..., 3.3386e+02,\n          3.3400e+02, 3.3414e+02],\n         [3.3429e+02, 3.3443e+02, 3.3457e+02,  ..., 3.3814e+02,\n          3.3829e+02, 3.3843e+02],\n         [3.3857e+02, 3.3871e+02, 3.3886e+02,  ..., 3.4243e+02,\n          3.4257e+02, 3.4271e+02]]])"},
  {"torch.tensor([float('nan'), float('inf'), 1.])", tensor({NAN, INFINITY, 1.f}), "tensor([nan, inf, 1.])"},
  {"torch.tensor([float('nan'), -float('inf'), 0.25])", tensor({NAN, -INFINITY, 0.25f}), "tensor([   nan,   -inf, 0.2500])"},
  {"torch.tensor([0.,0.])", zeros({2}), "tensor([0., 0.])"},
  {"torch.tensor([0.1,2.],dtype=torch.float16)", tensor({0.1f, 2.f}).to(kFloat16), "tensor([0.1000, 2.0000], dtype=float16)"},
  {"torch.tensor([0.1,2.],dtype=torch.bfloat16)", tensor({0.1f, 2.f}).to(kBFloat16), "tensor([0.1001, 2.0000], dtype=bfloat16)"},
  {"torch.linspace(0,1,30)", linspace(0, 1, 30), "tensor([0.0000, 0.0345, 0.0690, 0.1034, 0.1379, 0.1724, 0.2069, 0.2414, 0.2759,\n        0.3103, 0.3448, 0.3793, 0.4138, 0.4483, 0.4828, 0.5172, 0.5517, 0.5862,\n        0.6207, 0.6552, 0.6897, 0.7241, 0.7586, 0.7931, 0.8276, 0.8621, 0.8966,\n        0.9310, 0.9655, 1.0000])"},
  {"torch.arange(40)*1000", arange(40) * 1000, "tensor([    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,  9000,\n        10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000, 18000, 19000,\n        20000, 21000, 22000, 23000, 24000, 25000, 26000, 27000, 28000, 29000,\n        30000, 31000, 32000, 33000, 34000, 35000, 36000, 37000, 38000, 39000])"},
  {"torch.tensor([100.,2.5])", tensor({100.f, 2.5f}), "tensor([100.0000,   2.5000])"},
  {"torch.tensor([[1.,-2.],[3.,4.]]).t()", tensor({1.f, -2.f, 3.f, 4.f}, {2, 2}).t(), "tensor([[ 1.,  3.],\n        [-2.,  4.]])"},
  {"torch.tensor([1e-3, 1.])", tensor({1e-3f, 1.f}), "tensor([0.0010, 1.0000])"},
  {"torch.tensor([123456.789])", tensor({123456.789f}), "tensor([123456.7891])"},
  {"torch.arange(9,dtype=torch.float64)/3", arange(0, 9, 1, kFloat64) / 3, "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667],\n       dtype=float64)"},
  {"(torch.arange(8,dtype=torch.float64)/3).requires_grad_()", (arange(0, 8, 1, kFloat64) / 3).requires_grad_(), "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333],\n       dtype=float64, requires_grad=True)"},
  {"torch.zeros(0,2,dtype=torch.int64)", zeros({0, 2}, kInt64), "tensor([], size=(0, 2), dtype=int64)"},
  {"torch.zeros(0,dtype=torch.float16)", zeros({0}, kFloat16), "tensor([], dtype=float16)"},
  {"torch.tensor([[True,False,True]]*400)", ones({400, 3}, kBool).mul(tensor({true, false, true})), "tensor([[ True, False,  True],\n        [ True, False,  True],\n        [ True, False,  True],\n        ...,\n        [ True, False,  True],\n        [ True, False,  True],\n        [ True, False,  True]])"},
  {"torch.arange(1001.,dtype=torch.float64)*0.5", arange(0, 1001, 1, kFloat64) * 0.5, "tensor([  0.0000,   0.5000,   1.0000,  ..., 499.0000, 499.5000, 500.0000],\n       dtype=float64)"},
  {"torch.ones(3,4,dtype=torch.int32)[:, ::2]", ones({3, 4}, kInt32).slice(1, 0, 4, 2), "tensor([[1, 1],\n        [1, 1],\n        [1, 1]], dtype=int32)"},
  {"-torch.zeros(2)", -zeros({2}), "tensor([-0., -0.])"},
  };
  for (const Case& c : cases) {
    INFO(c.python);
    CHECK(c.t.str() == c.expected);
  }
  std::ostringstream os;
  os << tensor({1.f, 2.f});
  CHECK(os.str() == "tensor([1., 2.])");
  // History shows as grad_fn (PyTorch: tensor([2., 4.], grad_fn=<MulBackward0>)).
  Tensor x = tensor({1.f, 2.f}).requires_grad_();
  CHECK((x * 2).str() == "tensor([2., 4.], grad_fn=<MulBackward>)");
}

// ---- dtypes and conversions --------------------------------------------------------------

TEST_CASE("dtype names, parsing and promotion", "[core]") {
  CHECK(std::string(dtype_name(kBFloat16)) == "bfloat16");
  CHECK(std::string(dtype_name(kInt32)) == "int32");
  std::ostringstream os;
  os << kFloat16;
  CHECK(os.str() == "float16");
  CHECK(dtype_from_name("float") == kFloat32);
  CHECK(dtype_from_name("Float64") == kFloat64);
  CHECK(dtype_from_name("half") == kFloat16);
  CHECK(dtype_from_name("bf16") == kBFloat16);
  CHECK(dtype_from_name("long") == kInt64);
  CHECK(dtype_from_name("int") == kInt32);
  CHECK(dtype_from_name("bool") == kBool);
  require_throws_with<DTypeError>([] { dtype_from_name("complex64"); }, {"complex64"});
  CHECK(is_integral(kInt32));
  CHECK_FALSE(is_integral(kBool));
  CHECK(is_integral(kBool, true));
  CHECK_FALSE(is_floating_point(kInt64));

  // torch.promote_types(row, column), from /usr/bin/python3.
  const std::vector<DType> ds{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};
  const std::vector<std::vector<DType>> expected{
      {kFloat32, kFloat64, kFloat32, kFloat32, kFloat32, kFloat32, kFloat32},
      {kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64},
      {kFloat32, kFloat64, kFloat16, kFloat32, kFloat16, kFloat16, kFloat16},
      {kFloat32, kFloat64, kFloat32, kBFloat16, kBFloat16, kBFloat16, kBFloat16},
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt64, kInt64},
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt32},
      {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool},
  };
  for (size_t i = 0; i < ds.size(); ++i)
    for (size_t j = 0; j < ds.size(); ++j) {
      INFO(dtype_name(ds[i]) << " with " << dtype_name(ds[j]));
      CHECK(promote_types(ds[i], ds[j]) == expected[i][j]);
    }
}

TEST_CASE("float16 conversion rounds to nearest even like PyTorch", "[core]") {
  // torch.tensor(values).half().view(torch.int16), from /usr/bin/python3.
  const std::vector<float> values{1.0f, 65504.f, 65519.f, 65520.f, 1e6f,
                                  1 + 0x1p-11f,  // halfway between 1 and 1 + 2^-10: to even (1)
                                  1 + 3 * 0x1p-11f,  // halfway, rounds up to the even mantissa
                                  0x1p-24f, 0x1p-25f, 3 * 0x1p-25f,  // subnormal halfway cases
                                  0x1p-14f, -2.0f, -0.0f, 0.1f, 0.333333f, 1e-8f, 5.96e-8f, -65520.f,
                                  INFINITY, NAN, 0x1p-15f + 0x1p-25f};
  const std::vector<uint16_t> expected{0x3c00, 0x7bff, 0x7bff, 0x7c00, 0x7c00, 0x3c00, 0x3c02,
                                       0x0001, 0x0000, 0x0002, 0x0400, 0xc000, 0x8000, 0x2e66,
                                       0x3555, 0x0000, 0x0001, 0xfc00, 0x7c00, 0x7e00, 0x0200};
  Tensor h = from_vector(values).to(kFloat16);
  CHECK(h.dtype() == kFloat16);
  std::vector<uint16_t> got = bits16(h);
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("value " << values[i]);
    CHECK(got[i] == expected[i]);
    CHECK(Half(values[i]).bits == expected[i]);
  }
  // Back to float: exact.
  CHECK(float(Half::from_bits(0x0001)) == 0x1p-24f);
  CHECK(float(Half::from_bits(0x03ff)) == 1023 * 0x1p-24f);  // largest subnormal
  CHECK(float(Half::from_bits(0x7bff)) == 65504.f);
  CHECK(float(Half::from_bits(0x3555)) == 0.333251953125f);
  CHECK(std::signbit(float(Half::from_bits(0x8000))));
  CHECK(std::isinf(float(Half::from_bits(0xfc00))));
  CHECK(std::isnan(float(Half::from_bits(0x7e00))));
  // float64 sources round through float32, as PyTorch does: 1 + 2^-11 + 2^-40 gives 1.0.
  CHECK(bits16(from_vector(std::vector<double>{1 + 0x1p-11 + 0x1p-40}).to(kFloat16))[0] == 0x3c00);
}

TEST_CASE("bfloat16 conversion rounds to nearest even like PyTorch", "[core]") {
  // torch.tensor(values).bfloat16().view(torch.int16), from /usr/bin/python3.
  const std::vector<float> values{1.0f, 1 + 0x1p-8f, 1 + 3 * 0x1p-8f, 3.14159f, 3.4028235e38f,
                                  1e-40f, -0.0f, 0.1f, -1.5f, 65504.f, 1e30f, -INFINITY};
  const std::vector<uint16_t> expected{0x3f80, 0x3f80, 0x3f82, 0x4049, 0x7f80, 0x0001,
                                       0x8000, 0x3dcd, 0xbfc0, 0x4780, 0x714a, 0xff80};
  Tensor b = from_vector(values).to(kBFloat16);
  std::vector<uint16_t> got = bits16(b);
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("value " << values[i]);
    CHECK(got[i] == expected[i]);
    CHECK(BFloat16(values[i]).bits == expected[i]);
  }
  CHECK(std::isnan(float(BFloat16(NAN))));
  CHECK(std::isnan(from_vector(std::vector<float>{NAN}).to(kBFloat16).item<float>()));
  CHECK(float(BFloat16::from_bits(0x4049)) == 3.140625f);
  CHECK(bits16(from_vector(std::vector<double>{1 + 0x1p-8 + 0x1p-40}).to(kBFloat16))[0] == 0x3f80);
}

TEST_CASE("dtype conversions between all dtypes", "[core]") {
  // Float to integer truncates toward zero; anything non-zero (NaN too) is true.
  Tensor f = tensor({-1.7f, 2.9f, -0.5f, 300.7f});
  CHECK(f.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{-1, 2, 0, 300});
  CHECK(f.to(kInt32).to_vector<int32_t>() == std::vector<int32_t>{-1, 2, 0, 300});
  CHECK(tensor({0.f, 0.5f, -2.f, NAN}).to(kBool).to_vector<bool>() == std::vector<bool>{false, true, true, true});
  CHECK(tensor({true, false}).to(kFloat32).to_vector<float>() == std::vector<float>{1, 0});
  CHECK(tensor<int64_t>({-3, 7}).to(kFloat64).to_vector<double>() == std::vector<double>{-3, 7});
  // Every pair round-trips small integers exactly (bool: 0 and 1).
  const std::vector<DType> ds{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};
  for (DType a : ds)
    for (DType b : ds) {
      INFO(dtype_name(a) << " -> " << dtype_name(b));
      const bool boolean = a == kBool || b == kBool;
      std::vector<double> v = boolean ? std::vector<double>{0, 1, 1, 0} : std::vector<double>{-3, 0, 5, 100};
      Tensor x = from_vector(v, {2, 2}).to(a);
      Tensor y = x.to(b);
      CHECK(y.dtype() == b);
      CHECK(y.to_vector<double>() == v);
      // Non-contiguous source.
      CHECK(x.t().to(b).to_vector<double>() == std::vector<double>{v[0], v[2], v[1], v[3]});
    }
  // to() with the same dtype is the same tensor.
  CHECK(f.to(kFloat32).is_same(f));
  CHECK(f.float_().is_same(f));
  CHECK(f.to(kCPU).is_same(f));
  Tensor g = f.to(kCPU, kFloat64);
  CHECK(g.dtype() == kFloat64);
}

TEST_CASE("item and to_vector", "[core]") {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  // Row-major order of the view, whatever its strides.
  CHECK(a.t().to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(a.slice(1, 0, 3, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 4, 6});
  CHECK(a.to_vector<bool>() == std::vector<bool>(6, true));
  CHECK(a.to_vector<float>()[5] == 6.0f);
  CHECK(float(a.to(kFloat16).to_vector<Half>()[2]) == 3.0f);
  CHECK(scalar_tensor(2.5).item<double>() == 2.5);
  CHECK(a.select(0, 1).select(0, 2).item<int32_t>() == 6);
  CHECK(zeros({1, 1, 1}).item<float>() == 0.0f);
  CHECK(scalar_tensor(-1.5, kFloat16).item<float>() == -1.5f);

  Scalar s = scalar_tensor(0.25, kFloat64).item();
  CHECK_FALSE(s.is_integral());
  CHECK(s.to_double() == 0.25);
  Scalar i = scalar_tensor(9, kInt32).item();
  CHECK(i.is_integral());
  CHECK(i.to_int() == 9);
  Scalar b = scalar_tensor(true, kBool).item();
  CHECK(b.is_bool());
  CHECK(b.to<bool>());

  require_throws_with<ValueError>([&] { a.item<double>(); }, {"item", "6 elements", "(2, 3)"});
  require_throws_with<ValueError>([] { zeros({0}).item(); }, {"item", "(0,)"});
}

TEST_CASE("Scalar::to_int refuses a double that int64 cannot hold", "[core]") {
  CHECK(Scalar(2.9).to_int() == 2);  // truncated toward zero, as int64_t(2.9)
  CHECK(Scalar(-2.9).to_int() == -2);
  CHECK(Scalar(-0x1p63).to_int() == std::numeric_limits<int64_t>::min());
  CHECK(Scalar(0x1p62).to<int64_t>() == (int64_t(1) << 62));
  for (const double d : {1e300, -1e300, 0x1p63, std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    INFO(d);
    std::ostringstream value;
    value << d;
    require_throws_with<ValueError>([&] { Scalar(d).to_int(); }, {"Scalar", value.str(), "int64"});
  }
  // Through an op: filling an integer tensor, and a floating arange beyond int64 still works.
  require_throws_with<ValueError>([] { zeros({2}, kInt64).fill_(1e300); }, {"1e+300", "int64"});
  CHECK(arange(0.0, 4e19, 1e19, kFloat64).to_vector<double>() == std::vector<double>{0, 1e19, 2e19, 3e19});
}

// ---- devices --------------------------------------------------------------------------------

TEST_CASE("Device parsing and printing", "[core]") {
  CHECK(Device("cpu") == kCPU);
  CHECK(Device("cuda") == kCUDA);
  Device d("cuda:1");
  CHECK(d.is_cuda());
  CHECK(d.index == 1);
  CHECK(d.str() == "cuda:1");
  CHECK(Device("cuda:12").index == 12);
  CHECK(kCPU.str() == "cpu");
  CHECK(Device(DeviceType::CPU, 3).index == 0);  // the CPU has no ordinal
  CHECK_FALSE(Device("cuda:0") == Device("cuda:1"));
  std::ostringstream os;
  os << Device("cuda:2");
  CHECK(os.str() == "cuda:2");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda1", "cuda:1x", "CPU", ""}) {
    INFO(bad);
    require_throws_with<DeviceError>([&] { Device{std::string(bad)}; }, {"Device", bad});
  }
}

#ifndef LOOM_WITH_CUDA
TEST_CASE("CUDA tensors without a CUDA build give DeviceError", "[core]") {
  require_throws_with<DeviceError>([] { zeros({2}, kCUDA); }, {"cuda:0", "CUDA"});
  require_throws_with<DeviceError>([] { ones({2}).to(kCUDA); }, {"cuda:0"});
}
#endif
