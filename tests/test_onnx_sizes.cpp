// The provenance of sizes in ONNX export (Note [size provenance] in onnx/sizes.h): the fit of a
// size to its values at grown sizes, and graphs whose sizes follow the right axis where the
// example's sizes coincide (batch == sequence, a hidden size equal to the batch, size 1). The
// graphs run in ONNX Runtime in the CTest onnx_runtime_check (tests/onnx/).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <onnx/onnx_pb.h>

#include "core/factories.h"
#include "nn/linear.h"
#include "onnx/export.h"
#include "onnx/sizes.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace onnx_test;
using loom::onnx::SymSize;

namespace {

// The node that makes value v, or nullptr (a graph input or an initializer).
const ::onnx::NodeProto* producer(const ::onnx::ModelProto& m, const std::string& v) {
  for (const auto& n : m.graph().node())
    for (const auto& o : n.output())
      if (o == v) return &n;
  return nullptr;
}

std::vector<int64_t> ints_initializer(const ::onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) {
      REQUIRE(t.data_type() == ::onnx::TensorProto::INT64);
      std::vector<int64_t> v(t.raw_data().size() / 8);
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      return v;
    }
  FAIL("no initializer " << name);
  return {};
}

// "Shape(input)[a]" for a value read from an input's shape, "[6]" for a constant, else the op.
std::string describe_dim(const ::onnx::ModelProto& m, const std::string& v) {
  const ::onnx::NodeProto* n = producer(m, v);
  if (!n) {
    std::string s = "[";
    for (int64_t x : ints_initializer(m, v)) s += std::to_string(x);
    return s + "]";
  }
  if (n->op_type() == "Shape") {
    int64_t start = 0;
    for (const auto& a : n->attribute())
      if (a.name() == "start") start = a.i();
    return "Shape(" + n->input(0) + ")[" + std::to_string(start) + "]";
  }
  std::string s = n->op_type() + "(";
  for (int i = 0; i < n->input_size(); ++i) s += (i ? ", " : "") + describe_dim(m, n->input(i));
  return s + ")";
}

// Each run's sizes for axes (batch, sequence) = (6, 5), as the export makes them.
const auto kRuns = loom::onnx::run_sizes({6, 5});

std::vector<int64_t> values_of(const std::function<int64_t(int64_t, int64_t)>& f) {
  std::vector<int64_t> v;
  for (const auto& r : kRuns) v.push_back(f(r[0], r[1]));
  return v;
}

}  // namespace

TEST_CASE("onnx sizes: the runs grow one axis at a time, then all", "[onnx]") {
  REQUIRE(kRuns == std::vector<std::vector<int64_t>>{{6, 5}, {7, 5}, {6, 6}, {8, 7}});
}

TEST_CASE("onnx sizes: a size is fitted to scale times the axes it follows plus an offset", "[onnx]") {
  const std::vector<std::string> names{"batch", "sequence"};
  auto fit = [](const std::function<int64_t(int64_t, int64_t)>& f) { return loom::onnx::fit_size(values_of(f), kRuns); };
  REQUIRE(fit([](int64_t b, int64_t) { return b; }) == SymSize{1, {0}, 0});
  REQUIRE(fit([](int64_t b, int64_t t) { return b * t; }) == SymSize{1, {0, 1}, 0});
  REQUIRE(fit([](int64_t, int64_t t) { return t - 1; }) == SymSize{1, {1}, -1});
  REQUIRE(fit([](int64_t, int64_t t) { return 4 * t; }) == SymSize{4, {1}, 0});
  REQUIRE(to_string(*fit([](int64_t b, int64_t t) { return 3 * b * t - 2; }), names) == "3·batch·sequence - 2");
  // A constant equal to the example's batch (a hidden size of 6) stays a constant.
  REQUIRE(fit([](int64_t, int64_t) { return 6; }) == SymSize::constant(6));
  // Forms the graph cannot compute: refused, never guessed.
  REQUIRE_FALSE(fit([](int64_t b, int64_t t) { return b + t; }).has_value());
  REQUIRE_FALSE(fit([](int64_t, int64_t t) { return t / 2; }).has_value());  // 2, 2, 3, 3: moves only in the check
  REQUIRE_FALSE(fit([](int64_t b, int64_t) { return b * b; }).has_value());
}

TEST_CASE("onnx sizes: equal example sizes and size 1 fit by the axis that moved", "[onnx]") {
  const auto runs = loom::onnx::run_sizes({5, 5});  // batch == sequence
  REQUIRE(loom::onnx::fit_size({5, 6, 5, 7}, runs) == SymSize{1, {0}, 0});  // the batch
  REQUIRE(loom::onnx::fit_size({5, 5, 6, 7}, runs) == SymSize{1, {1}, 0});  // the sequence
  REQUIRE(loom::onnx::fit_size({5, 5, 5, 5}, runs) == SymSize::constant(5));
  const auto one = loom::onnx::run_sizes({1});  // a batch of one: 1, 2, 3
  REQUIRE(loom::onnx::fit_size({1, 2, 3}, one) == SymSize{1, {0}, 0});
  REQUIRE(loom::onnx::fit_size({1, 1, 1}, one) == SymSize::constant(1));
}

TEST_CASE("onnx sizes: an input grows by repeating its last slice", "[onnx]") {
  const Tensor x = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(loom::onnx::grow(x, 0, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6});
  REQUIRE(loom::onnx::grow(x, 1, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 3, 4, 5, 6, 6});
}

namespace {
// zeros({B, 6}) + a Linear's output, exported at batch 6: the hidden size equals the batch.
struct InitStateImpl : nn::Module {
  InitStateImpl() : fc(register_module("fc", nn::Linear(3, 6))) {}
  Tensor forward(const Tensor& x) { return fc(x) + zeros({x.size(0), 6}); }  // (B, 6)
  nn::Linear fc;
};
// (B, T, 4) -> (B·T, 4) -> (B, T, 4), exported with B == T == 4.
struct FoldImpl : nn::Module {
  FoldImpl() : fc(register_module("fc", nn::Linear(4, 4))) {}
  Tensor forward(const Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1);
    return fc(x.reshape({b * t, 4})).reshape({b, t, 4}).select(1, t - 1);
  }
  nn::Linear fc;
};
struct HalveImpl : nn::Module {  // a size the graph cannot compute: B / 2
  Tensor forward(const Tensor& x) { return x.slice(0, 0, x.size(0) / 2) * 2.0; }
};
struct SqueezeImpl : nn::Module {  // squeezes the batch away where it is 1
  Tensor forward(const Tensor& x) { return x.squeeze(0) * 2.0; }
};
struct SizeBranchImpl : nn::Module {  // control flow on a size
  Tensor forward(const Tensor& x) { return x.size(0) > 6 ? x.exp() : x.abs(); }
};
struct FixedBatchImpl : nn::Module {  // takes a batch of 6 only
  Tensor forward(const Tensor& x) { return x.reshape({6, 3}) * 2.0; }
};
struct ScalarOfSizeImpl : nn::Module {  // a scalar computed from a size
  Tensor forward(const Tensor& x) { return x * (1.0 / double(x.size(0))); }
};
struct ConstantOfSizeImpl : nn::Module {  // a tensor made on the host from a size
  Tensor forward(const Tensor& x) { return x + from_vector<float>({float(x.size(0))}); }
};

// The message of the NotImplementedError that exporting model(x) throws.
template <typename Model>
std::string refusal(const Model& model, const Tensor& x) {
  try {
    loom::onnx::export_model<1>(model, {x}, scratch("refused.onnx"));
  } catch (const NotImplementedError& e) {
    return e.what();
  }
  FAIL("exported a model that should be refused");
  return "";
}
}  // namespace

TEST_CASE("onnx sizes: a hidden size equal to the batch stays a constant beside the batch", "[onnx]") {
  auto model = std::make_shared<InitStateImpl>();
  const std::string path = scratch("init_state.onnx");
  loom::onnx::export_model<1>(model, {randn({6, 3})}, path);
  const auto m = read(path);
  const auto& fill = only_node(m, "ConstantOfShape");
  REQUIRE(describe_dim(m, fill.input(0)) == "Concat(Shape(input_0)[0], [6])");
  const auto& out = m.graph().output(0).type().tensor_type().shape();
  REQUIRE(out.dim(0).dim_param() == "batch");
  REQUIRE(out.dim(1).dim_value() == 6);
}

TEST_CASE("onnx sizes: batch == sequence: each size follows its own axis", "[onnx]") {
  auto model = std::make_shared<FoldImpl>();
  const std::string path = scratch("fold.onnx");
  loom::onnx::export_model<1>(model, {randn({4, 4, 4})}, path);
  const auto m = read(path);
  std::vector<std::string> shapes;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "Reshape") shapes.push_back(describe_dim(m, n.input(1)));
  REQUIRE(shapes == std::vector<std::string>{"Concat(Mul(Shape(input_0)[0], Shape(input_0)[1]), [4])",
                                             "Concat(Shape(input_0)[0], Shape(input_0)[1], [4])"});
  const auto& gather = only_node(m, "Gather");  // select(1, T - 1): the last at any T
  REQUIRE(ints_initializer(m, gather.input(1)) == std::vector<int64_t>{-1});
}

TEST_CASE("onnx sizes: a batch of one exports where nothing squeezes it away", "[onnx]") {
  nn::Linear fc(3, 2);
  const std::string path = scratch("batch_one.onnx");
  loom::onnx::export_model<1>(fc, {randn({1, 3})}, path);
  REQUIRE(read(path).graph().input(0).type().tensor_type().shape().dim(0).dim_param() == "batch");
  REQUIRE_THAT(refusal(std::make_shared<SqueezeImpl>(), randn({1, 3})), Catch::Contains("size-1"));
}

TEST_CASE("onnx sizes: sizes of another form and control flow on sizes are refused", "[onnx]") {
  REQUIRE_THAT(refusal(std::make_shared<HalveImpl>(), randn({6, 3})),
               Catch::Contains("slice in the model's forward: its size argument 2 is (3, 3, 4)"));
  REQUIRE_THAT(refusal(std::make_shared<SizeBranchImpl>(), randn({6, 3})), Catch::Contains("when batch is 7"));
  REQUIRE_THAT(refusal(std::make_shared<ScalarOfSizeImpl>(), randn({6, 3})), Catch::Contains("scalar computed from a size"));
  REQUIRE_THAT(refusal(std::make_shared<ConstantOfSizeImpl>(), randn({6, 3})),
               Catch::Contains("reads a constant (its input 1, shape (1,)) whose shape or values change when batch is 7"));
}

TEST_CASE("onnx sizes: a forward that fails at grown sizes says at which", "[onnx]") {
  try {
    loom::onnx::export_model<1>(std::make_shared<FixedBatchImpl>(), {randn({6, 3})}, scratch("fixed.onnx"));
    FAIL("exported a model that takes one batch size as dynamic");
  } catch (const ValueError& e) {
    REQUIRE_THAT(std::string(e.what()), Catch::Contains("the forward fails when batch is 7"));
  }
}

TEST_CASE("onnx sizes: a failed export leaves the file as it was", "[onnx]") {
  const std::string path = scratch("kept.onnx");
  std::ofstream(path) << "before";
  REQUIRE_THROWS_AS(loom::onnx::export_model<1>(std::make_shared<HalveImpl>(), {randn({6, 3})}, path),
                    NotImplementedError);
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(content == "before");
  REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));
}
