// The nccl backend (distributed/process_group_nccl.h). Every build: what a build without it
// (no CUDA, or CUDA without NCCL) answers, and a CUDA build's answer without a GPU. On a GPU
// ("[.cuda]", skipped without one): a world of one rank (a TCPStore on a free loopback
// port) runs every collective for every dtype against the value computed on the CPU, on
// the caller's streams, and refuses CPU tensors with the typed errors. More ranks need
// more GPUs (one per rank): distributed_worker under loomrun would take --backend nccl.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cuda_test_util.h"
#include "distributed/distributed.h"
#include "test_util.h"

using namespace loom;
using namespace loom::distributed;
using loom::test::require_throws_with;
using std::chrono::milliseconds;

namespace {

// After LOOM_SKIP_WITHOUT_CUDA(): a GPU, but a CUDA build configured without NCCL cannot
// run these either, and says so as the CUDA tests do (exit 77: CTest's "Skipped").
void skip_without_nccl() {
  if (is_nccl_available()) return;
  std::printf("SKIPPED: %s\n", nccl_unavailable_reason().c_str());
  std::fflush(stdout);
  std::exit(77);
}

const DType kDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64};
const ReduceOp kOps[] = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::MIN};

// A world of one: rank 0 serving its own store on a free port.
std::unique_ptr<ProcessGroupNCCL> world_of_one(milliseconds timeout = milliseconds(60000)) {
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, true, timeout);
  return std::make_unique<ProcessGroupNCCL>(store, 0, 1, ProcessGroupNCCLOptions().timeout(timeout).device(0));
}

// What op over `ranks` ranks gives when every rank holds x, computed on the CPU in double.
std::vector<double> reduced(const Tensor& x, ReduceOp op, int ranks) {
  std::vector<double> v = test::values(x);
  if (op == ReduceOp::SUM) {
    for (double& e : v) e *= ranks;
  }
  return v;  // AVG, MAX and MIN of equal values: the value
}

std::string label(const char* op, DType dtype, const Shape& shape) {
  return std::string(op) + " " + dtype_name(dtype) + " " + shape_str(shape);
}

}  // namespace

TEST_CASE("ProcessGroupNCCL: a build without the nccl backend says what it needs", "[distributed]") {
  if (is_nccl_available()) {
    CHECK(nccl_unavailable_reason().empty());
    return;  // the [cuda] cases below (or the no-GPU case) cover this build
  }
  const std::string needs = built_with_cuda() ? "NCCL_ROOT" : "the cuda preset";
  CHECK(nccl_unavailable_reason().find(needs) != std::string::npos);
  // Before the environment and the store: port 1 would fail differently.
  auto options = InitOptions().rank(0).world_size(1).master_addr("127.0.0.1").master_port(1).timeout(milliseconds(200));
  require_throws_with<DistributedError>([&] { init_process_group("nccl", options); },
                                        {"init_process_group", "nccl needs", needs});
  CHECK_FALSE(is_initialized());
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(2000));
  require_throws_with<DistributedError>([&] { ProcessGroupNCCL(store, 0, 1); }, {"ProcessGroupNCCL", needs});
  require_throws_with<DistributedError>([&] { init_process_group("mpi", options); },
                                        {"unknown backend 'mpi'", "\"gloo\"", "\"nccl\""});
}

TEST_CASE("ProcessGroupNCCL: a CUDA build without a GPU refuses with a DeviceError", "[distributed]") {
  if (!is_nccl_available() || cuda::is_available()) return;  // the cases above and below
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(2000));
  require_throws_with<DeviceError>([&] { ProcessGroupNCCL(store, 0, 1); },
                                   {"ProcessGroupNCCL", "no usable CUDA device", "one GPU per rank"});
}

TEST_CASE("ProcessGroupNCCL: every collective and dtype in a world of one matches the CPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  skip_without_nccl();
  auto group = world_of_one();
  CHECK(group->backend() == "nccl");
  CHECK(group->device() == kCUDA);
  const int ranks = group->size();
  for (DType dtype : kDTypes) {
    for (const Shape& shape : {Shape{3, 5}, Shape{0, 4}, Shape{}}) {
      Tensor x = test::random_nonzero(shape, dtype);
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::AVG && !is_floating_point(dtype)) continue;  // refused: see the errors case
        Tensor t = x.to(kCUDA);
        auto work = group->all_reduce(t, op);
        work->wait();
        CHECK(work->is_completed());
        test::check_close(t.cpu(), reduced(x, op, ranks), dtype, label("all_reduce", dtype, shape) + " " +
                                                                      reduce_op_name(op));

        Tensor out = zeros(shape, TensorOptions(dtype).device(kCUDA));
        group->reduce_scatter(out, {x.to(kCUDA)}, op)->wait();
        test::check_close(out.cpu(), reduced(x, op, ranks), dtype, label("reduce_scatter", dtype, shape) + " " +
                                                                        reduce_op_name(op));
      }
      Tensor b = x.to(kCUDA);
      group->broadcast(b, 0)->wait();
      test::check_close(b.cpu(), test::values(x), dtype, label("broadcast", dtype, shape));

      std::vector<Tensor> outs{zeros(shape, TensorOptions(dtype).device(kCUDA))};
      group->all_gather(outs, x.to(kCUDA))->wait();
      test::check_close(outs[0].cpu(), test::values(x), dtype, label("all_gather", dtype, shape));
    }
  }
  auto barrier = group->barrier();
  barrier->wait();
  CHECK(barrier->is_completed());
}

TEST_CASE("ProcessGroupNCCL: collectives wait for the caller's stream, and wait() for them", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  skip_without_nccl();
  auto group = world_of_one();
  cuda::Stream side = cuda::Stream::create();
  cuda::StreamGuard guard(side);
  // Big enough that the fills are still running when the collective is queued.
  for (int round = 0; round < 3; ++round) {
    Tensor input = full({1 << 22}, double(round + 2), TensorOptions(kFloat32).device(kCUDA));
    std::vector<Tensor> outs{empty({1 << 22}, TensorOptions(kFloat32).device(kCUDA))};
    group->all_gather(outs, input)->wait();
    Tensor sum = outs[0].sum().cpu();
    CHECK(sum.item<double>() == double(round + 2) * double(1 << 22));
  }
  // The group's own default-stream path too: the caller's stream is the default stream here.
  cuda::StreamGuard back(cuda::Stream::default_stream());
  Tensor t = full({1 << 20}, 1.5, TensorOptions(kFloat64).device(kCUDA));
  group->all_reduce(t, ReduceOp::AVG)->wait();
  CHECK(t.min().cpu().item<double>() == 1.5);
  CHECK(t.max().cpu().item<double>() == 1.5);
}

TEST_CASE("ProcessGroupNCCL: argument errors name the op, the shapes, the dtypes and the devices", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  skip_without_nccl();
  auto group = world_of_one();
  Tensor cpu = zeros({2, 3});
  Tensor m = zeros({2, 3}, TensorOptions(kCUDA));
  require_throws_with<DeviceError>([&] { group->all_reduce(cpu); },
                                   {"all_reduce", "nccl backend takes CUDA tensors", "cpu", "(2, 3)", "float32"});
  require_throws_with<DeviceError>([&] { group->broadcast(cpu); }, {"broadcast", "CUDA tensors", "cpu"});
  require_throws_with<DeviceError>([&] { group->all_gather({m}, cpu); }, {"all_gather", "CUDA tensors"});
  require_throws_with<DeviceError>([&] { group->all_gather({cpu}, m); }, {"all_gather", "CUDA tensors"});
  require_throws_with<DeviceError>([&] { group->reduce_scatter(m, {cpu}); }, {"reduce_scatter", "CUDA tensors"});
  require_throws_with<ValueError>([&] { group->all_reduce(m.transpose(0, 1)); },
                                  {"all_reduce", "(3, 2)", "not contiguous"});
  require_throws_with<DTypeError>(
      [&] { group->all_reduce(zeros({2}, TensorOptions(kInt64).device(kCUDA)), ReduceOp::AVG); },
      {"all_reduce", "AVG", "int64"});
  require_throws_with<DTypeError>([&] { group->broadcast(zeros({2}, TensorOptions(kBool).device(kCUDA))); },
                                  {"broadcast", "Bool"});
  require_throws_with<ValueError>([&] { group->broadcast(m, 1); }, {"broadcast", "root 1"});
  require_throws_with<ValueError>([&] { group->all_gather({m, m}, m); }, {"all_gather", "2 outputs", "1 ranks"});
  require_throws_with<ShapeError>([&] { group->all_gather({zeros({3, 2}, TensorOptions(kCUDA))}, m); },
                                  {"all_gather", "(3, 2)", "(2, 3)"});
  require_throws_with<DTypeError>(
      [&] { group->reduce_scatter(m, {zeros({2, 3}, TensorOptions(kFloat64).device(kCUDA))}); },
      {"reduce_scatter", "float64", "float32"});
  if (cuda::device_count() >= 2) {
    require_throws_with<DeviceError>([&] { group->all_reduce(zeros({2}, TensorOptions(Device("cuda:1")))); },
                                     {"all_reduce", "cuda:0", "cuda:1", "one GPU per rank"});
  }
  // The group still works after refusing them.
  group->all_reduce(m)->wait();
}

TEST_CASE("ProcessGroupNCCL: a rank that never comes fails the rendezvous within the timeout", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  skip_without_nccl();
  auto store = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(ProcessGroupNCCL(store, 0, 2, ProcessGroupNCCLOptions().timeout(milliseconds(500)).device(0)),
                    DistributedError);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  require_throws_with<DeviceError>(
      [&] { ProcessGroupNCCL(store, 0, 1, ProcessGroupNCCLOptions().device(cuda::device_count())); },
      {"ProcessGroupNCCL", "LOCAL_RANK", "visible"});
}

TEST_CASE("ProcessGroupNCCL: init_process_group(\"nccl\") makes the default group on a GPU", "[.cuda]") {
  LOOM_SKIP_WITHOUT_CUDA();
  skip_without_nccl();
  const int port = TCPStore("127.0.0.1", 0, true).port();  // free once the probe closes
  init_process_group("nccl", InitOptions().rank(0).world_size(1).master_addr("127.0.0.1").master_port(port));
  CHECK(default_group().backend() == "nccl");
  Tensor t = full({4}, 2.0, TensorOptions(kCUDA));
  all_reduce(t, ReduceOp::SUM)->wait();
  barrier()->wait();
  destroy_process_group();
  CHECK(t.cpu().to_vector<float>() == std::vector<float>{2, 2, 2, 2});
}
